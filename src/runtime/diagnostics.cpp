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

void pid_text(char (&out)[24]) {
  char digits[24];
  int n = 0;
  for (unsigned long v = static_cast<unsigned long>(getpid()); v || !n; v /= 10) digits[n++] = '0' + v % 10;
  for (int i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  out[n] = '\0';
}

}  // namespace runtime
}  // namespace heaptype
