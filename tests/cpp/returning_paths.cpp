// returning_paths.cpp: call paths that come back after the runtime forgot them.
//
// A server whose call paths outnumber what a thread keeps (src/runtime/thread_state.hpp:
// sites a generation at a time) meets each path again in a later generation, under a
// new site number. This program walks every path of a binary tree of calls `passes`
// times: 2^depth paths (default depth 15: 32,768, two generations of sites), each
// ending in one `new Leaf` deleted at once, except every 4,096th, which is kept
// until the end; half the kept ones are deleted before exit, the rest leak.
//
//   main -> descend -> (left | right) -> descend -> ... -> descend
//
// usage: returning_paths [depth] [passes]; prints "leaves=N kept=M".
#include <cstdio>
#include <cstdlib>

struct Leaf {
  unsigned long path;
  unsigned long pad[2];
};  // 24 bytes

constexpr unsigned kKeepEvery = 4096;
constexpr unsigned kMaxKept = 1 << 16;
Leaf* g_kept[kMaxKept];
unsigned g_kept_count = 0;
unsigned long g_leaves = 0;

// A leaf of the walk (call_tree_walk.hpp): one Leaf, kept every 4,096th leaf.
__attribute__((always_inline, no_instrument_function)) inline void at_leaf(unsigned long path);

#include "call_tree_walk.hpp"

inline void at_leaf(unsigned long path) {
  Leaf* leaf = new Leaf;
  leaf->path = path;
  g_sink = g_sink + leaf->path;
  ++g_leaves;
  if (path % kKeepEvery == 0 && g_kept_count < kMaxKept)
    g_kept[g_kept_count++] = leaf;
  else
    delete leaf;
}

int main(int argc, char** argv) {
  int depth = argc > 1 ? std::atoi(argv[1]) : 15;
  int passes = argc > 2 ? std::atoi(argv[2]) : 4;
  for (int pass = 0; pass < passes; ++pass) descend(depth, 0);
  for (unsigned i = 0; i < g_kept_count / 2; ++i) delete g_kept[i];
  std::printf("leaves=%lu kept=%u\n", g_leaves, g_kept_count);
  return 0;
}
