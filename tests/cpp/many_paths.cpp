// many_paths.cpp: more distinct call paths than a thread's tables keep.
//
// A test suite's binary reaches a new call path with nearly every allocation; the
// runtime keeps a bounded number of calling-context nodes and sites per thread and
// then starts a new generation (src/runtime/call_context.hpp, thread_state.hpp). This
// program walks every path of a binary tree of calls, twice:
//
//   main -> walk_all -> descend -> (left | right) -> descend -> ... -> descend
//
// `depth` levels of left/right calls give 2^depth distinct paths, each ending in
// one `new Leaf` (deleted at once). With the default depth of 16: 65,536 leaves a
// pass, 2 x 65,536 nodes for the left/right frames and as many for descend, far
// more than a generation holds. The second pass meets every path again after the
// runtime forgot it: the profile must still give each path exactly 2 Leafs.
//
// In the first pass, every 1,024th leaf also allocates a raw 48-byte block
// (malloc, untyped) that is kept; after both passes each is tagged as a
// Tagged (heaptype::tag): a retyping of blocks whose sites were forgotten long ago.
//
// Prints "leaves=N tagged=M".
#include <cstdio>
#include <cstdlib>

struct Leaf {
  unsigned long path;
  unsigned long pad[2];
};  // 24 bytes

struct Tagged {
  unsigned long value[6];
};  // 48 bytes

constexpr unsigned kMaxKept = 1024;
void* g_kept[kMaxKept];
unsigned g_kept_count = 0;
unsigned long g_leaves = 0;
bool g_first_pass = true;

// A leaf of the walk (call_tree_walk.hpp): one Leaf, deleted at once; in the first pass
// every 1,024th leaf also keeps a raw block.
__attribute__((always_inline, no_instrument_function)) inline void at_leaf(unsigned long path);

#include "call_tree_walk.hpp"

inline void at_leaf(unsigned long path) {
  Leaf* leaf = new Leaf;
  leaf->path = path;
  g_sink = g_sink + leaf->path;
  delete leaf;
  ++g_leaves;
  if (g_first_pass && path % 1024 == 0 && g_kept_count < kMaxKept) g_kept[g_kept_count++] = std::malloc(sizeof(Tagged));
}

__attribute__((noinline)) void walk_all(int depth) {
  descend(depth, 0);
  g_sink = g_sink + 4;
}

int main(int argc, char** argv) {
  int depth = argc > 1 ? std::atoi(argv[1]) : 16;
  walk_all(depth);
  g_first_pass = false;
  walk_all(depth);
  for (unsigned i = 0; i < g_kept_count; ++i) heaptype::tag(static_cast<Tagged*>(g_kept[i]), 1);
  for (unsigned i = 0; i < g_kept_count; ++i) std::free(g_kept[i]);
  std::printf("leaves=%lu tagged=%u\n", g_leaves, g_kept_count);
  return 0;
}
