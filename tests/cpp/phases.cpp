// phases.cpp: three phases 40 ms apart, each holding one type, so that figures over
// a time range are known: a range that ends before the first sleep is over holds
// only Alpha.
//
//   phase_alpha() 100 Alpha (64 B) made, held through a 40 ms sleep, freed
//   phase_beta()  50 Beta (256 B) made, held through a 40 ms sleep, freed
//   phase_gamma() 20 Gamma (1 KiB) made, held through a 40 ms sleep, freed
#include <chrono>
#include <thread>

#define NOINLINE __attribute__((noinline))

struct Alpha { char bytes[64]; };
struct Beta { char bytes[256]; };
struct Gamma { char bytes[1024]; };

static void pause_40ms() { std::this_thread::sleep_for(std::chrono::milliseconds(40)); }

template <class T, int N>
NOINLINE void hold() {
  T* held[N];
  for (T*& p : held) p = new T;
  pause_40ms();
  for (T* p : held) delete p;
}

NOINLINE void phase_alpha() { hold<Alpha, 100>(); }
NOINLINE void phase_beta() { hold<Beta, 50>(); }
NOINLINE void phase_gamma() { hold<Gamma, 20>(); }

int main() {
  phase_alpha();
  phase_beta();
  phase_gamma();
  return 0;
}
