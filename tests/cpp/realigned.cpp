// realigned.cpp: a function whose stack GCC realigns (a local aligned to 32 bytes:
// `lea 0x8(%rsp),%r10; and $-32,%rsp; push -0x8(%r10); push %rbp; mov %rsp,%rbp`),
// called from two callers whose frames leave the stack at different alignments. Its
// CFA is an expression (the word at rbp - 8) and its frame record sits at a distance
// from the CFA that varies with the caller. Built without frame pointers and run under
// `heaptype run`, a walk steps over it by its CFI: the paths stopped at it, rooted at
// realigned() (rapidjson's unittest, -march=native: 57 of its 70 roots).
// test_frame_rules.py.
#include <cstdio>

struct alignas(32) Wide {
  double lanes[4];
};

struct Record {
  long value;
};

__attribute__((noinline)) Record* make(long a, long b, long c, long d, long e, long f, long g, long h) {
  return new Record{a + b + c + d + e + f + g + h};
}

__attribute__((noinline)) Record* realigned(long n) {
  Wide w;
  w.lanes[0] = static_cast<double>(n);
  asm volatile("" : : "r"(&w) : "memory");
  return make(n, 2, 3, 4, 5, 6, 7, 8);  // two arguments on the stack
}

__attribute__((noinline)) Record* near_caller(long n) {
  Record* r = realigned(n);
  asm volatile("");
  return r;
}

__attribute__((noinline)) Record* far_caller(long n) {
  volatile char pad[40];
  pad[0] = 1;
  Record* r = realigned(n + pad[0]);
  asm volatile("");
  return r;
}

int main(int argc, char**) {
  long sum = 0;
  for (int i = 0; i < 6; ++i) {
    Record* r = (i & 1) ? far_caller(argc + i) : near_caller(argc + i);
    sum += r->value;
    delete r;
  }
  std::printf("%ld\n", sum);
  return 0;
}
