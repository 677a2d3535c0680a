#include "child_environment.hpp"

#include <cstdlib>
#include <cstring>

namespace heaptype {
namespace runtime {
namespace {

const char kRuntimeFile[] = "libheaptype.so";

bool is_separator(char c) { return c == ':' || c == ' '; }

// `entry` (not NUL-terminated, `size` bytes) names the runtime, by path or by name.
bool names_the_runtime(const char* entry, size_t size) {
  const char* base = entry;
  for (size_t i = 0; i < size; ++i)
    if (entry[i] == '/') base = entry + i + 1;
  size_t length = static_cast<size_t>(entry + size - base);
  return length == sizeof kRuntimeFile - 1 && std::memcmp(base, kRuntimeFile, length) == 0;
}

// Removes the runtime's entries from a preload list (separated by ':' or ' ', as
// ld.so reads it), in place: the others keep their order and separators.
void remove_runtime_from(char* list) {
  char* out = list;
  for (char* in = list; *in;) {
    char separator = ':';
    while (is_separator(*in)) separator = *in++;
    char* entry = in;
    while (*in && !is_separator(*in)) ++in;
    size_t size = static_cast<size_t>(in - entry);
    if (!size || names_the_runtime(entry, size)) continue;
    if (out != list) *out++ = separator;
    std::memmove(out, entry, size);
    out += size;
  }
  *out = '\0';
}

}  // namespace

// The values are edited in place, never unsetenv()/setenv(): this runs inside the
// program's first allocation, which may be setenv()'s own malloc() with glibc's
// environment lock held; rewriting the characters of a value takes no lock, frees
// nothing and leaves the environment's array as it was. An empty LD_PRELOAD preloads
// nothing, and an empty HEAPTYPE_CHILDREN reads as unset.
void keep_children_unprofiled_if_asked() {
  char* children = getenv("HEAPTYPE_CHILDREN");
  if (!children || std::strcmp(children, "unprofiled") != 0) return;
  if (char* preload = getenv("LD_PRELOAD")) remove_runtime_from(preload);
  children[0] = '\0';
}

}  // namespace runtime
}  // namespace heaptype
