// many_types.cpp: more types than the aggregated mode's first type table holds, with
// blocks that live across its growth.
//
// Usage: many_types [TYPES] (default 300). Prints nothing. Early (type 0) and Late
// (type TYPES + 1) are counted first; then every Kind<N>, N < TYPES, has two blocks live
// at once, freed; then the first Early is freed and two more made, and Late's one is
// freed and made again twice. Own peaks: Kind<N> 2 x its size, Early 3 x 24 B (two made
// after one freed, while the second of the first pair lives), Late 2 x 40 B. None live
// at exit but Early's last pair and Late's last pair.
#include <cstdlib>
#include <utility>

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

template <int N>
struct Kind {
  long v[N % 5 + 1];
};

struct Early { long v[3]; };
struct Late { long v[5]; };

template <int N>
void pair_of_kind(int types) {
  if (N >= types) return;
  Kind<N>* a = new Kind<N>;
  Kind<N>* b = new Kind<N>;
  keep(a);
  keep(b);
  delete a;
  delete b;
}

template <int... N>
void every_kind(int types, std::integer_sequence<int, N...>) {
  (pair_of_kind<N>(types), ...);
}

int main(int argc, char** argv) {
  int types = argc > 1 ? std::atoi(argv[1]) : 300;
  if (types < 0 || types > 400) return 2;
  Early* first = new Early;
  Early* second = new Early;
  Late* late = new Late;
  keep(first);
  keep(second);
  keep(late);
  every_kind(types, std::make_integer_sequence<int, 400>());
  delete first;
  keep(new Early);
  keep(new Early);
  delete second;
  delete late;
  keep(new Late);
  keep(new Late);
  return 0;
}
