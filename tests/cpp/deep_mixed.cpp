// deep_mixed.cpp: allocations at the bottom of recursions deeper than a walk keeps (128
// return addresses), whose frames alternate between the program's functions (frame
// pointers) and stale_slot_lib.S's call_with_stale_slot (outside the program's module:
// stepped over by its frame rule). At some depth the frames stepped over by rules fill
// the walk's buffer just before a frame with a frame pointer comes: the walk must stop
// there, not write past the buffer (GCC's cc1plus, whose code keeps no frame pointers
// but calls back into framed code, crashed so under `heaptype run`).
//
// Usage: deep_mixed [FROM TO [further]] (default 50 80): each depth from FROM to TO (either
// way), allocating once in the innermost level itself and once a frame further in (first,
// with "further"). Prints the allocations. Deepest first, the first walks ask the unwinder from deeper than its
// backtrace holds (160 frames): the last frame it holds has no caller to learn a rule from.
#include <cstdio>
#include <cstdlib>

extern "C" void call_with_stale_slot(void (*callback)(), long stale);

struct Leaf {
  long value[2];
};

int g_levels_left = 0;
bool g_one_frame_further = false;
long g_made = 0;

__attribute__((noinline)) void allocate_here() {
  Leaf* leaf = new Leaf{};
  asm volatile("" : : "r"(leaf) : "memory");
  delete leaf;
  ++g_made;
}

__attribute__((noinline)) void allocate_further() {
  allocate_here();
  asm volatile("" ::: "memory");  // not a tail call
}

__attribute__((noinline)) void level() {
  if (g_levels_left-- > 0) {
    call_with_stale_slot(level, 1);
  } else if (g_one_frame_further) {
    allocate_further();
  } else {
    allocate_here();
  }
  asm volatile("" ::: "memory");
}

int main(int argc, char** argv) {
  int from = argc > 2 ? std::atoi(argv[1]) : 50, to = argc > 2 ? std::atoi(argv[2]) : 80;
  bool further_first = argc > 3 && argv[3][0] == 'f';
  int step = from <= to ? 1 : -1;  // deepest first: the first walks meet backtraces cut short
  for (int depth = from; depth != to + step; depth += step) {
    for (bool further : {further_first, !further_first}) {
      g_levels_left = depth;
      g_one_frame_further = further;
      level();
    }
  }
  std::printf("%ld\n", g_made);
  return 0;
}
