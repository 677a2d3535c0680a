#include "diagnostics.hpp"

#include <unistd.h>

#include <cstring>

namespace heaptype {
namespace runtime {

void say(const char* a, const char* b, const char* c, const char* d, const char* e) {
  const char* parts[] = {"heaptype: ", a, b, c, d, e, "\n"};
  for (const char* part : parts) {
    size_t n = std::strlen(part);
    if (n && write(STDERR_FILENO, part, n) < 0) return;
  }
}

}  // namespace runtime
}  // namespace heaptype
