// alloc_wrappers.cpp: allocations through wrappers of the program's own, as GCC, gdb
// and Squid make them (libiberty's xmalloc family). Built without HeapType and run
// under `heaptype run`: every block is untyped, and the report names who called the
// wrappers, not the wrappers.
//
//   read_table()   10 x xmalloc(1000)            10,000 B through xmalloc
//   parse_words()  20 x xcalloc(10, 100)          20,000 B through xcalloc (which calls xmalloc)
//   main           1 x malloc(500)                   500 B, no wrapper
// All stay live.
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" __attribute__((noinline)) void* xmalloc(size_t n) {
  void* p = std::malloc(n);
  if (!p) std::abort();
  asm volatile("" : : "g"(p) : "memory");
  return p;
}

extern "C" __attribute__((noinline)) void* xcalloc(size_t count, size_t size) {
  void* p = xmalloc(count * size);
  std::memset(p, 0, count * size);
  asm volatile("" : : "g"(p) : "memory");
  return p;
}

static void* kept[64];
static int kept_count;

static void keep(void* p) {
  asm volatile("" : : "g"(p) : "memory");  // the block escapes: no malloc is elided
  kept[kept_count++] = p;
}

__attribute__((noinline)) void read_table() {
  for (int i = 0; i < 10; ++i) keep(xmalloc(1000));
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void parse_words() {
  for (int i = 0; i < 20; ++i) keep(xcalloc(10, 100));
  asm volatile("" ::: "memory");
}

int main() {
  read_table();
  parse_words();
  keep(std::malloc(500));
  std::printf("kept %d\n", kept_count);
  return 0;
}
