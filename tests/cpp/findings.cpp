// findings.cpp: releases a program gets wrong, each passed on to the allocator
// (tests/python/test_findings.py). Built in the macro mode and in the type-aware mode.
//
//   delete-base N    N times: a Derived (40 B) deleted through a Base* (4 B) without a
//                    virtual destructor, in delete_as_base(): a mismatched delete (only
//                    the type-aware mode sees static types at delete)
//   free-new N       N times: `new Counted` (24 B) released with free()
//   delete-array N   N times: `new Plain[4]` (4 x 8 B, no cookie) released with delete
//   free-cookie N    N times: `new Counted[3]` (a cookie, then 3 x 24 B) released with free()
// Several MODE N pairs run one after the other. It prints "done=N", N the releases
// made: the program keeps working.
#include <cstdio>
#include <cstdlib>
#include <cstring>

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Base { int id; };
struct Derived : Base { char payload[36]; };
static_assert(sizeof(Base) == 4 && sizeof(Derived) == 40, "sizes the test relies on");
struct Counted { long a, b, c; ~Counted() { keep(this); } };
struct Plain { long v; };
static_assert(sizeof(Counted) == 24 && sizeof(Plain) == 8, "sizes the test relies on");

volatile int g_released = 0;

__attribute__((noinline)) Base* make_derived() {
  Derived* d = new Derived;
  keep(d);
  return d;
}

// Not a tail call, so that delete_as_base stays on the release's call path.
__attribute__((noinline)) void delete_as_base(Base* b) {
  delete b;
  g_released = g_released + 1;
}

__attribute__((noinline)) void free_new() {
  Counted* c = new Counted;
  keep(c);
  std::free(c);
  g_released = g_released + 1;
}

__attribute__((noinline)) void delete_array() {
  Plain* a = new Plain[4];
  keep(a);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wunknown-warning-option"
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
  delete a;
#pragma GCC diagnostic pop
  g_released = g_released + 1;
}

__attribute__((noinline)) void free_cookie() {
  Counted* a = new Counted[3];
  keep(a);
  std::free(a);
  g_released = g_released + 1;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc % 2 == 0) return 2;
  for (int arg = 1; arg + 1 < argc; arg += 2) {
    const char* mode = argv[arg];
    long n = std::atol(argv[arg + 1]);
    for (long i = 0; i < n; ++i) {
      if (std::strcmp(mode, "delete-base") == 0) delete_as_base(make_derived());
      else if (std::strcmp(mode, "free-new") == 0) free_new();
      else if (std::strcmp(mode, "delete-array") == 0) delete_array();
      else if (std::strcmp(mode, "free-cookie") == 0) free_cookie();
      else return 2;
    }
  }
  std::printf("done=%d\n", g_released);
  return 0;
}
