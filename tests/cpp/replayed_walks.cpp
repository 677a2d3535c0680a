// replayed_walks.cpp: walks that replay the last walk's steps, and must notice where the
// stack above no longer holds what it held. Built without frame pointers and run under
// `heaptype run`: every frame is stepped over by its rule, so a walk replays the last
// one from the first state both share (src/runtime/call_context.cpp, walk_steps).
//
// Usage: replayed_walks ROUNDS. Each round allocates one Leaf through each of these, in
// turn (the recursion is descend(); its frames lie at the same addresses each time):
//   0: main > from_a > descend x13                        (depths 12 to 0)
//   1: main > from_b > descend x13                        (the same frames under another caller)
//   2: main > from_a > descend x6 > descend_other > descend x6
//                                                          (another function mid-way)
//   3: main > from_b > descend x12                        (one level less)
//   4: main > from_a > descend x140                       (deeper than a walk keeps)
// Consecutive walks share the frames of the recursion, at the same stack addresses with
// the same return addresses, up to where the callers part. Prints "rounds=N
// same_stack=1" when the innermost frames of 0, 1 and 2 lay at one address in every
// round (else the walks would not replay where the callers differ).
#include <cstdint>
#include <cstdio>
#include <cstdlib>

struct Leaf {
  long value[4];
};

static uintptr_t g_innermost[3];
static bool g_same_stack = true;

static uintptr_t stack_pointer() {
  uintptr_t sp;
  asm volatile("mov %%rsp, %0" : "=r"(sp));
  return sp;
}

__attribute__((noinline)) Leaf* descend(int depth, int which);

// One level of the recursion in a function of its own (variant 2, at depth 6).
__attribute__((noinline)) Leaf* descend_other(int depth, int which) {
  Leaf* leaf = descend(depth - 1, which);
  asm volatile("" ::: "memory");
  return leaf;
}

__attribute__((noinline)) Leaf* descend(int depth, int which) {
  if (depth == 0) {
    if (which < 3) {
      uintptr_t sp = stack_pointer();
      if (g_innermost[0] && sp != g_innermost[0]) g_same_stack = false;
      g_innermost[0] = sp;
    }
    return new Leaf{{depth, which, 0, 0}};
  }
  Leaf* leaf = depth == 7 && which == 2 ? descend_other(depth - 1, which) : descend(depth - 1, which);
  asm volatile("" ::: "memory");
  return leaf;
}

__attribute__((noinline)) Leaf* from_a(int depth, int which) {
  Leaf* leaf = descend(depth, which);
  asm volatile("" ::: "memory");
  return leaf;
}

__attribute__((noinline)) Leaf* from_b(int depth, int which) {
  Leaf* leaf = descend(depth, which + 0);
  asm volatile("nop" ::: "memory");
  return leaf;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 10;
  long sum = 0;
  for (int round = 0; round < rounds; ++round) {
    Leaf* leaves[5] = {from_a(12, 0), from_b(12, 1), from_a(12, 2), from_b(11, 3), from_a(139, 4)};
    for (Leaf* leaf : leaves) {
      sum += leaf->value[1];
      delete leaf;
    }
  }
  (void)g_innermost;
  std::printf("rounds=%d same_stack=%d sum=%ld\n", rounds, g_same_stack ? 1 : 0, sum);
  return 0;
}
