// stale_slot.cpp: allocations made in a callback of stale_slot_lib.S's function, whose
// frame holds a copy of the caller's frame pointer in a local slot at the first call
// only. Every allocation's call path is main > relay(long) > call_with_stale_slot >
// allocate() > Item.
//
// Usage: stale_slot [N] (default 100): one call with the copy, then N without.
#include <cstdio>
#include <cstdlib>

extern "C" void call_with_stale_slot(void (*callback)(), long stale);

struct Item {
  long value[3];
};

Item* volatile g_last = nullptr;

__attribute__((noinline)) void allocate() {
  delete g_last;
  g_last = new Item{};
}

__attribute__((noinline)) void relay(long stale) {
  call_with_stale_slot(allocate, stale);
  asm volatile("" ::: "memory");  // not a tail call: relay stays on the stack
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 100;
  relay(0);
  for (int i = 0; i < n; ++i) relay(0x100 + i);
  delete g_last;
  std::printf("%d\n", n + 1);
  return 0;
}
