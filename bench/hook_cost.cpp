// hook_cost.cpp: the cost of one enter/exit pair of -finstrument-functions hooks.
// A loop calls a chain of DEPTH noinline functions; built with the flag and run
// with glibc's empty hooks, then with HeapType's: the difference over the number
// of pairs is what keeping the calling context costs per call.
#include <chrono>
#include <cstdio>
#include <cstdlib>

static volatile long sink;

#define LEVEL(n, next) \
  __attribute__((noinline)) long f##n(long x) { long r = next(x + 1); asm volatile("" ::: "memory"); return r; }

__attribute__((noinline)) long f0(long x) { return x * 3; }
LEVEL(1, f0) LEVEL(2, f1) LEVEL(3, f2) LEVEL(4, f3) LEVEL(5, f4) LEVEL(6, f5) LEVEL(7, f6) LEVEL(8, f7)

int main(int argc, char** argv) {
  long iterations = argc > 1 ? std::atol(argv[1]) : 10000000;
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; ++i) sink = f8(i);
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  long pairs = iterations * 9;  // f8 .. f0
  std::printf("%.3f ns per call (%ld enter/exit pairs)\n", ns / pairs, pairs);
  return 0;
}
