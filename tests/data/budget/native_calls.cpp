// native_calls.cpp: a shared library that Python tests call through ctypes, for the
// in-process heap budgets (a Python process with the HeapType runtime loaded).
//
//   make_tokens(n)  n Token (32 B) live at once, then freed: peak 32*n, allocations n
//   leak(n)         n Leaked (16 B) never freed: leaked 16*n (their pointers live in a
//                   std::vector<Leaked*>, whose buffer stays live too)
#include <vector>

struct Token { long a[4]; };
struct Leaked { long a[2]; };
static_assert(sizeof(Token) == 32 && sizeof(Leaked) == 16, "");

static std::vector<Leaked*>* kept = nullptr;

extern "C" long make_tokens(long n) {
  Token** tokens = new Token*[n ? n : 1];
  for (long i = 0; i < n; ++i) tokens[i] = new Token();
  for (long i = 0; i < n; ++i) delete tokens[i];
  delete[] tokens;
  return n;
}

extern "C" void leak(long n) {
  if (!kept) kept = new std::vector<Leaked*>();
  for (long i = 0; i < n; ++i) kept->push_back(new Leaked());
}
