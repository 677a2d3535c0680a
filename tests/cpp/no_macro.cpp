// no_macro.cpp: code the `new` macro breaks, built in the type-aware mode with no
// fence (tests/python/test_findings.py): a class with its own operator new, and
// `::operator new(n)` spelled after the force-included header.
//
//   Pooled   2 blocks through its own operator new (malloc): untyped in this mode
//   Widget   3 blocks, 3 x 20 B, one live at exit
//   raw      1 block of 48 B from ::operator new(48), untyped, freed
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Pooled {
  static void* operator new(std::size_t size) { return std::malloc(size); }
  static void operator delete(void* p) { std::free(p); }
  long value[2];
};

struct Widget { int parts[5]; };
static_assert(sizeof(Widget) == 20, "sizes the test relies on");

int main() {
  Pooled* a = new Pooled{{1, 2}};
  Pooled* b = new Pooled{{3, 4}};
  keep(a);
  keep(b);
  long sum = a->value[1] + b->value[0];
  delete a;
  delete b;
  void* raw = ::operator new(48);
  keep(raw);
  ::operator delete(raw);
  Widget* w[3];
  for (Widget*& p : w) {
    p = new Widget{};
    keep(p);
  }
  delete w[0];
  delete w[1];
  std::printf("sum=%ld\n", sum);
  return 0;
}
