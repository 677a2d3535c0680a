// A function of internal linkage (static, in a namespace; and one in an anonymous
// namespace) inlined at one call site and called out of line through a pointer at
// another, as jsoncpp's Json::duplicateAndPrefixStringValue is. GCC's DWARF gives such a
// function no linkage name. Allocates 10 blocks through the inlined copies and 7
// through the out-of-line ones, of each function.
#include <cstdlib>
#include <cstring>

namespace N {
static inline char* dup(const char* s, unsigned n) {
  char* p = static_cast<char*>(std::malloc(n + 1));
  std::memcpy(p, s, n);
  p[n] = 0;
  return p;
}
}  // namespace N

namespace {
inline char* copy(const char* s, unsigned n) {
  char* p = static_cast<char*>(std::malloc(n + 2));
  std::memcpy(p, s, n);
  p[n] = 0;
  return p;
}
}  // namespace

__attribute__((noinline)) char* inlined_dup(const char* s) { return N::dup(s, 3); }
__attribute__((noinline)) char* inlined_copy(const char* s) { return copy(s, 3); }
char* (*volatile dup_pointer)(const char*, unsigned) = N::dup;  // forces out-of-line copies
char* (*volatile copy_pointer)(const char*, unsigned) = copy;

int main() {
  for (int i = 0; i < 10; ++i) std::free(inlined_dup("abcdef"));
  for (int i = 0; i < 7; ++i) std::free(dup_pointer("abcdef", 4));
  for (int i = 0; i < 10; ++i) std::free(inlined_copy("abcdef"));
  for (int i = 0; i < 7; ++i) std::free(copy_pointer("abcdef", 4));
  return 0;
}
