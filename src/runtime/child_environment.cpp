#include "child_environment.hpp"

#include <cstdlib>
#include <cstring>

#include "tracker.hpp"

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

namespace {

// The edit above leaves the variables there, empty: a program that asks whether
// LD_PRELOAD is set (getenv() != nullptr, as programs that refuse to be preloaded
// into do) would see it set where `heaptype run` found it unset. The loader runs this
// constructor of the preloaded runtime after libstdc++'s start-up (whose allocation
// started the runtime) and before the program's own, outside any allocation: the
// emptied variables are unset there. unsetenv() moves the environment's pointers and
// allocates nothing. A runtime not started yet has edited nothing: nothing to do.
__attribute__((constructor)) void unset_emptied_variables() {
  int state = g_state.load(std::memory_order_acquire);
  if (state != kActive && state != kDisabled) return;
  const char* children = getenv("HEAPTYPE_CHILDREN");
  if (!children || *children) return;  // not asked, or not edited
  unsetenv("HEAPTYPE_CHILDREN");
  const char* preload = getenv("LD_PRELOAD");
  if (preload && !*preload) unsetenv("LD_PRELOAD");
}

}  // namespace

}  // namespace runtime
}  // namespace heaptype
