// deep_recursion.cpp: ping(n) and pong(n) call each other 40,000 frames deep (argv[1]
// sets the depth). At the bottom they make 3 Bottom objects, freed on the way back
// up; every 10,000 frames a Level object is made and freed. Every view and export of
// the profile must cope with call paths this deep.
#include <cstdlib>

#define NOINLINE __attribute__((noinline))

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Bottom { long v[4]; };
struct Level { long v[2]; };

NOINLINE void pong(int n);

NOINLINE void ping(int n) {
  if (n == 0) {
    Bottom* b[3];
    for (Bottom*& p : b) p = new Bottom;
    keep(b);
    for (Bottom* p : b) delete p;
    return;
  }
  if (n % 10000 == 0) {
    Level* l = new Level;
    keep(l);
    delete l;
  }
  pong(n - 1);
  keep(&n);  // not a tail call: every frame stays on the stack
}

NOINLINE void pong(int n) {
  if (n == 0) {
    ping(0);
    return;
  }
  ping(n - 1);
  keep(&n);
}

int main(int argc, char** argv) {
  ping(argc > 1 ? std::atoi(argv[1]) : 40000);
  return 0;
}
