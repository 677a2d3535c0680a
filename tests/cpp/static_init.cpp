// static_init.cpp: an allocation in a static constructor, before main, and one in main.
// Built stripped, neither function has a name: only main's may be called main.
#include <cstdio>
#include <cstdlib>

struct Early {
  void* block;
  Early() : block(std::malloc(1000)) {}
};
Early g_early;

int main() {
  void* late = std::malloc(2000);
  std::printf("%p %p\n", g_early.block, late);
  std::free(late);
  return 0;
}
