// own_allocator.cpp: a program that brings its own malloc, free and operator new, as one
// statically linked with mimalloc, jemalloc or tcmalloc does (Debian's mold): defined in
// the executable, they come before a preloaded runtime in the lookup order. Here they
// hand out blocks of a static arena and never give them back. Prints the allocations
// its own functions served.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace {
alignas(16) unsigned char g_arena[1 << 22];
size_t g_used = 0;
long g_served = 0;

void* take(size_t size) {
  size = (size + 15) & ~size_t{15};
  if (size > sizeof g_arena - g_used) return nullptr;
  void* p = g_arena + g_used;
  g_used += size;
  ++g_served;
  return p;
}
}  // namespace

extern "C" {
__attribute__((visibility("default"))) void* malloc(size_t size) { return take(size ? size : 1); }
__attribute__((visibility("default"))) void free(void*) {}
__attribute__((visibility("default"))) void* calloc(size_t n, size_t size) {
  void* p = take(n * size ? n * size : 1);
  if (p) std::memset(p, 0, n * size);
  return p;
}
__attribute__((visibility("default"))) void* realloc(void* old, size_t size) {
  void* p = take(size ? size : 1);
  if (p && old) std::memcpy(p, old, size);  // the arena's bytes after `old` are readable
  return p;
}
}

void* operator new(size_t size) {
  if (void* p = take(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void*) noexcept {}
void operator delete(void*, size_t) noexcept {}

int main() {
  std::vector<std::string> words;
  for (int i = 0; i < 100; ++i) words.push_back(std::string(40, static_cast<char>('a' + i % 26)));
  std::printf("served %ld\n", g_served);
  return 0;
}
