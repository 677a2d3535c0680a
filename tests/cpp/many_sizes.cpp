// many_sizes.cpp: more sites than a generation holds, on one call path.
//
// A site is a (call path, size, type): `rounds` blocks of as many sizes make as many
// sites (default 40,000: more than two generations of 16,384, thread_state.hpp),
// while one Small is made and deleted at the same call path every round. Its site
// is met in every generation; after each generation the thread forgets it, and it
// must be counted under the number of the generation in use.
//
// usage: many_sizes [rounds]; prints "rounds=N".
#include <cstdio>
#include <cstdlib>

struct Small {
  int value[4];
};

volatile unsigned long g_sink = 0;

__attribute__((noinline)) void make_small() {
  Small* small = new Small;
  small->value[0] = 1;
  g_sink = g_sink + small->value[0];
  delete small;
}

int main(int argc, char** argv) {
  unsigned rounds = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 40000;
  for (unsigned i = 0; i < rounds; ++i) {
    char* sized = static_cast<char*>(std::malloc(16 + i));
    sized[0] = 1;
    g_sink = g_sink + sized[0];
    std::free(sized);
    make_small();
  }
  std::printf("rounds=%u\n", rounds);
  return 0;
}
