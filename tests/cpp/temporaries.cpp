// temporaries.cpp: temporary allocations by heaptrack's rule, case by case. A free is
// temporary when the program's previous allocation event (allocation or free) was an
// allocation at the freed block's site (size and calling context). Each case has its
// own type or function, so a report by type or by function shows its count:
//
//   InOrder   ten made, one Spacer made, the ten freed in order               0 of 10
//   SameSite  ten made at one site and freed in order right away: the first
//             free follows the tenth allocation at its own site                1 of 10
//   Pair      fifty made and freed one at a time                             50 of 50
//   Outer     alloc Outer, alloc Inner, free Inner, free Outer                0 of 1
//   Inner                                                                     1 of 1
//   Front     alloc Front, alloc Back, free Front, free Back: the runtime
//   Back      writes FREE_LAST for Back (its last block), after another free  0 of 1 each
//   Row       five made, then freed last first: only the first free follows
//             an allocation                                                   1 of 5
//   warm_up() one malloc'd block of 16 B from c_alloc(), freed at once          1 of 1
//   grow()    c_alloc(64), realloc at once, free: realloc frees the block (right
//             after its allocation) and allocates the new one, freed next     2 of 2
//   regrow()  c_alloc(64) p, c_alloc(8) q, realloc p, free q, free p          0 of 3
//   Spacer    made before InOrder's frees, freed last                         0 of 1
//
// grow()'s block is c_alloc()'s first: it still waits for a type (probation: the
// runtime does not know yet that the call site allocates untyped blocks) when the
// realloc comes. The realloc ends the wait and is recorded as heaptrack records
// every realloc: the old block's free, then the new block. warm_up() runs last.
//
// Nothing is printed before the end (stdio's buffer is an allocation too). In all:
// 86 allocations, 56 temporaries; at the peak (in regrow, after the realloc) the
// Spacer, q and the 8,192 B block are live: 8,312 B.
#include <cstdio>
#include <cstdlib>

#define NOINLINE __attribute__((noinline))

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct InOrder { char bytes[40]; };
struct SameSite { char bytes[48]; };
struct Pair { char bytes[56]; };
struct Outer { char bytes[72]; };
struct Inner { char bytes[80]; };
struct Front { char bytes[88]; };
struct Back { char bytes[96]; };
struct Row { char bytes[104]; };
struct Spacer { char bytes[112]; };

Spacer* g_spacer;

NOINLINE void in_order() {
  InOrder* made[10];
  for (InOrder*& p : made) keep(p = new InOrder);
  keep(g_spacer = new Spacer);
  for (InOrder* p : made) delete p;
}

NOINLINE void same_site() {
  SameSite* made[10];
  for (SameSite*& p : made) keep(p = new SameSite);
  for (SameSite* p : made) delete p;
}

NOINLINE void pairs() {
  for (int i = 0; i < 50; ++i) {
    Pair* p = new Pair;
    keep(p);
    delete p;
  }
}

NOINLINE void nested() {
  Outer* a = new Outer;
  keep(a);
  Inner* b = new Inner;
  keep(b);
  delete b;
  delete a;
}

NOINLINE void frees_in_a_row() {
  Front* a = new Front;
  keep(a);
  Back* b = new Back;
  keep(b);
  delete a;
  delete b;
}

NOINLINE void last_first() {
  Row* made[5];
  for (Row*& p : made) keep(p = new Row);
  for (int i = 4; i >= 0; --i) delete made[i];
}

NOINLINE void* c_alloc(size_t bytes) {
  void* p = std::malloc(bytes);
  keep(p);
  return p;
}

NOINLINE void warm_up() { std::free(c_alloc(16)); }

NOINLINE void grow() {
  void* p = c_alloc(64);
  p = std::realloc(p, 4096);
  keep(p);
  std::free(p);
}

NOINLINE void regrow() {
  void* p = c_alloc(64);
  void* q = c_alloc(8);
  keep(q);
  p = std::realloc(p, 8192);
  keep(p);
  std::free(q);
  std::free(p);
}

int main() {
  in_order();
  same_site();
  pairs();
  nested();
  frees_in_a_row();
  last_first();
  grow();
  regrow();
  warm_up();
  delete g_spacer;
  std::puts("done");
  return 0;
}
