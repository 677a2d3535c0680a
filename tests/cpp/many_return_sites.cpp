// many_return_sites.cpp: SITES distinct functions (default 4,000), each allocating one
// block, called ROUNDS times (default 4) through a table, everything built without frame
// pointers (as a distribution's or a wheel's programs are): the call-path walk needs a
// frame rule for each of the SITES return addresses, which the runtime learns from their
// call frame information or the unwinder. The program counts the runtime's calls to
// _Unwind_Backtrace and _Unwind_Find_FDE (count_backtraces.hpp) and prints
// "sites=N rounds=R backtraces=B fde_lookups=F".
//
// Usage: many_return_sites [ROUNDS]

#include <array>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "count_backtraces.hpp"

#ifndef SITES
#define SITES 4000
#endif


struct Block {
  long value;
};

template <int I>
__attribute__((noinline)) Block* site() {
  Block* b = new Block{I};
  asm volatile("" : : "r"(b) : "memory");
  return b;
}

using Site = Block* (*)();

template <int... I>
constexpr std::array<Site, sizeof...(I)> sites(std::integer_sequence<int, I...>) {
  return {&site<I>...};
}

constexpr std::array<Site, SITES> kSites = sites(std::make_integer_sequence<int, SITES>{});

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 4;
  static Block* blocks[SITES];
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < SITES; ++i) blocks[i] = kSites[i]();
    for (Block* b : blocks) delete b;
  }
  std::printf("sites=%d rounds=%d backtraces=%lu fde_lookups=%lu\n", SITES, rounds, g_backtraces, g_fde_lookups);
  return 0;
}
