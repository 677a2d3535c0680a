// many_sizes.cpp: more sites than a generation holds, on one call path.
//
// A site is a (call path, size, type): `rounds` blocks of as many sizes make as many
// sites (default 40,000: more than two generations of 16,384, thread_state.hpp),
// while one Small is made and deleted at the same call path every round. Its site
// is met in every generation; after each generation the thread forgets it, and it
// must be counted under the number of the generation in use. The run pauses 2 ms
// every 4,096 rounds: an aggregated run's ticker (HEAPTYPE_TICKER_AFTER_MS=0) retires
// the forgotten sites while the run goes on.
//
// usage: many_sizes [rounds]; prints "rounds=N".
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

struct Small {
  int value[4];
};

volatile unsigned long g_sink = 0;
char* volatile g_escape = nullptr;

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
    g_escape = sized;  // seen by no one, but kept: the compiler may not drop the pair
    std::free(sized);
    make_small();
    if (i % 4096 == 4095) usleep(2000);  // the ticker retires forgotten sites meanwhile
  }
  std::printf("rounds=%u\n", rounds);
  return 0;
}
