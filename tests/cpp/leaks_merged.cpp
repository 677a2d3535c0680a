// leaks_merged.cpp: blocks left live at exit whose rows merge several sites and threads.
//
// hold(k) makes k Held (40 B) at one new-expression and one more at a second, keeps
// them, and frees every other block it made before (so each site has freed blocks
// too). Three threads and main each call worker() -> hold(4); main also calls
// hold(2) directly. Live at exit, by call path (function names, as the leaks view
// merges them):
//
//   thread roots: worker() > hold(int)       3 threads x 5 = 15 Held, 600 B
//   main > worker() > hold(int)              5 Held, 200 B
//   main > hold(int)                         3 Held, 120 B
//
// and Spare (24 B): one made and freed per hold() call, never live at exit.
#include <thread>
#include <vector>

#define NOINLINE __attribute__((noinline))

struct Held { long v[5]; };
struct Spare { long v[3]; };

static thread_local std::vector<Held*>* t_held;

NOINLINE void hold(int k) {
  static thread_local std::vector<Held*> held;
  t_held = &held;
  for (int i = 0; i < 2 * k; ++i) held.push_back(new Held);
  held.push_back(new Held);  // the second site
  // free the first k of this call's loop: k stay from the loop, one from the second site
  for (int i = 0; i < k; ++i) {
    delete held[held.size() - 2 - i];
    held[held.size() - 2 - i] = nullptr;
  }
  Spare* spare = new Spare;
  delete spare;
}

NOINLINE void worker() {
  hold(4);
  asm volatile("");  // no tail call: worker() stays a frame of the path
}

int main() {
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  worker();
  hold(2);
  return t_held->empty() ? 1 : 0;
}
