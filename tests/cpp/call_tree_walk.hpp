// call_tree_walk.hpp: a binary tree of calls, one distinct call path to each leaf.
//
//   descend -> (left | right) -> descend -> ... -> descend
//
// descend(depth, path) makes 2^depth paths; the left/right frames spell the leaf's
// number. At depth 0 it calls at_leaf(path), which the program including this header
// defines first, always inlined and not instrumented: what the leaf allocates is
// allocated in descend's own frame, in every calling-context mode.
#ifndef HEAPTYPE_TESTS_CALL_TREE_WALK_HPP
#define HEAPTYPE_TESTS_CALL_TREE_WALK_HPP

inline volatile unsigned long g_sink = 0;

void descend(int depth, unsigned long path);

// Two functions, so that the two branches are told apart by their frames, and work
// after each call, so that no call becomes a tail call.
__attribute__((noinline)) void left(int depth, unsigned long path) {
  descend(depth, path << 1);
  g_sink = g_sink + 1;
}

__attribute__((noinline)) void right(int depth, unsigned long path) {
  descend(depth, (path << 1) | 1);
  g_sink = g_sink + 2;
}

__attribute__((noinline)) void descend(int depth, unsigned long path) {
  if (depth == 0) return at_leaf(path);
  left(depth - 1, path);
  right(depth - 1, path);
  g_sink = g_sink + 3;
}

#endif
