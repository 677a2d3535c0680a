// lifetimes.cpp: a program whose heap figures over time are known exactly.
//
//   f()         makes and frees one Kilo (1 KiB), called 100 times: 100 temporaries
//   g(n)        makes n Kilo (default 10) and hands them back to main, which frees
//               them after h(): the Kilo peak is exactly n KiB, reached in g
//   h()         50 Quarter (256 B), each freed before the next: 50 temporaries
//   leak()      three Leaked (48 B) never freed, from leak()
//
// main runs f() x100, g(n), h(), frees g's blocks, then leak(). argv[1] sets n.
// The phases are 3 ms apart, so that the runtime's clock (a tick a millisecond by
// default) tells them apart on a timeline.
#include <cstdlib>
#include <ctime>

#define NOINLINE __attribute__((noinline))

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Kilo { char bytes[1024]; };
struct Quarter { char bytes[256]; };
struct Leaked { char bytes[48]; };

Leaked* g_leaked[3];

static void pause_between_phases() {
  timespec pause{0, 3'000'000};
  nanosleep(&pause, nullptr);
}

NOINLINE void f() {
  Kilo* k = new Kilo;
  keep(k);
  delete k;
}

NOINLINE Kilo** g(int n) {
  Kilo** held = static_cast<Kilo**>(std::malloc(sizeof(Kilo*) * static_cast<unsigned>(n)));
  for (int i = 0; i < n; ++i) held[i] = new Kilo;
  return held;
}

NOINLINE void h() {
  for (int i = 0; i < 50; ++i) {
    Quarter* q = new Quarter;
    keep(q);
    delete q;
  }
}

NOINLINE void release(Kilo** held, int n) {
  for (int i = 0; i < n; ++i) delete held[i];
  std::free(held);
}

NOINLINE void leak() {
  for (Leaked*& p : g_leaked) p = new Leaked;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 10;
  for (int i = 0; i < 100; ++i) f();
  pause_between_phases();
  Kilo** held = g(n);
  pause_between_phases();
  h();
  pause_between_phases();
  release(held, n);
  pause_between_phases();
  leak();
  return 0;
}
