// own_operator_new.cpp: a class that declares its own operator new, compiled with the
// force-included heaptype/new.hpp (tests/python/test_runtime_hostile.py). Without the
// fence (-DFENCED=0) it cannot compile, and the compiler's error must name the fix;
// fenced with heaptype/undef_new.h and heaptype/define_new.h it compiles and works.
#include <cstddef>
#include <cstdlib>

#if FENCED
#include <heaptype/undef_new.h>
#endif
struct Pooled {
  static void* operator new(std::size_t size) { return std::malloc(size); }
  static void operator delete(void* p) { std::free(p); }
  long value[2];
};
#if FENCED
#include <heaptype/define_new.h>
#endif

int main() {
  Pooled* p = new Pooled{{1, 2}};
  long v = p->value[1];
  delete p;
  return v == 2 ? 0 : 1;
}
