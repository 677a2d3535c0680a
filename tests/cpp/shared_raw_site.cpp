// shared_raw_site.cpp: one raw allocation function that several types share, each
// typed by its caller's placement new (tests/python/test_runtime_truth.py), as
// Cap'n Proto's heap arrays are: `operator new(n)` in one function, the type named
// only after it returns. Beside it, storage from `new char[n]` into which placement
// new builds a D: a pool's (room for four) stays char; storage of exactly one D holds
// that D.
//
//   shared_raw_site N   N rounds, each: an A (16 B) and a B[2] (16 B) and a C[3]
//                       built one by one (48 B), all through `raw`; a raw block
//                       nobody types (16 B); a char[128] pool with a D built at
//                       its start; a char[32] with a D built in it. All freed at
//                       the end. Prints "as=N bs=N cs=N raws=N pools=N storages=N".
#include <cstdio>
#include <cstdlib>
#include <new>

struct A {
  long x[2];
};
struct B {
  long y;
};
struct C {
  char c[16];
};
struct D {
  int v[8];
};

static_assert(sizeof(A) == 16 && sizeof(B[2]) == 16 && sizeof(C[3]) == 48 && sizeof(D) == 32, "sizes");

void* volatile g_last = nullptr;

// The shared call site: not a tail call (its caller's call site would be its own).
#include <heaptype/undef_new.h>
__attribute__((noinline)) static void* raw(std::size_t n) {
  void* p = ::operator new(n);
  g_last = p;
  return p;
}
#include <heaptype/define_new.h>

template <class T>
__attribute__((noinline)) static T* built_one_by_one(unsigned n) {
  T* p = static_cast<T*>(raw(n * sizeof(T)));
  for (unsigned i = 0; i < n; ++i) new (p + i) T{};
  return p;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 10;
  void** kept = static_cast<void**>(std::malloc(sizeof(void*) * 4 * static_cast<unsigned>(n)));
  int used = 0;
  for (int i = 0; i < n; ++i) {
    kept[used++] = new (raw(sizeof(A))) A{};
    kept[used++] = new (raw(sizeof(B[2]))) B[2];
    kept[used++] = built_one_by_one<C>(3);
    kept[used++] = raw(16);
  }
  char** pools = static_cast<char**>(std::malloc(sizeof(char*) * 2 * static_cast<unsigned>(n)));
  for (int i = 0; i < n; ++i) {
    pools[2 * i] = new char[4 * sizeof(D)];
    new (pools[2 * i]) D{{i}};
    pools[2 * i + 1] = new char[sizeof(D)];
    new (pools[2 * i + 1]) D{{i}};
  }
  std::printf("as=%d bs=%d cs=%d raws=%d pools=%d storages=%d\n", n, n, n, n, n, n);
  for (int i = 0; i < used; ++i) ::operator delete(kept[i]);
  for (int i = 0; i < 2 * n; ++i) delete[] pools[i];
  std::free(kept);
  std::free(pools);
  return 0;
}
