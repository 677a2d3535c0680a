// baseline.cpp: allocates nothing itself. Its profile holds only what glibc and
// libstdc++ allocate at start-up and exit (e.g. libstdc++'s 72,704-byte emergency
// exception pool): the tests subtract it from other programs' untyped rows.
//
// It names malloc (without calling it) so that the runtime's allocation hooks are
// linked in from libheaptype.a, as they are in every program that allocates.
#include <cstdlib>

int main() {
  void* (*volatile named)(std::size_t) = &std::malloc;
  (void)named;
  return 0;
}
