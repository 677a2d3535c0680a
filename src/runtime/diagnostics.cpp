#include "diagnostics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "libc_next.hpp"

namespace heaptype {
namespace runtime {
namespace {

enum LogState { kNotRead, kNoLog, kLogFile };
std::atomic<int> g_log_state{kNotRead};
char g_log_path[4096];

// One line, cut to the buffer: a single write(2), so that the lines of several
// processes appending to one log never interleave.
size_t compose(char (&line)[4608], const char* const (&parts)[5]) {
  size_t used = 0;
  auto add = [&](const char* text) {
    size_t n = std::strlen(text);
    if (n > sizeof line - 1 - used) n = sizeof line - 1 - used;
    std::memcpy(line + used, text, n);
    used += n;
  };
  add("heaptype: ");
  for (const char* part : parts) add(part);
  line[used++] = '\n';
  return used;
}

void write_line(int fd, const char* line, size_t size) {
  while (size) {
    ssize_t n = write(fd, line, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    line += n;
    size -= static_cast<size_t>(n);
  }
}

// Opened and closed for each message: a descriptor kept open could be closed by the
// program (a daemon closes them all) and its number reused for one of its own files.
bool append_to_log(const char* line, size_t size) {
  if (g_log_state.load(std::memory_order_acquire) == kNotRead) capture_log_destination();
  if (g_log_state.load(std::memory_order_acquire) != kLogFile) return false;
  int fd = open(g_log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  write_line(fd, line, size);
  close_own(fd);
  return true;
}

}  // namespace

void capture_log_destination() {
  int error = errno;
  const char* path = getenv("HEAPTYPE_LOG");
  size_t n = path ? std::strlen(path) : 0;
  bool usable = n && n < sizeof g_log_path;
  if (usable) std::memcpy(g_log_path, path, n + 1);
  g_log_state.store(usable ? kLogFile : kNoLog, std::memory_order_release);
  errno = error;
}

void say(const char* a, const char* b, const char* c, const char* d, const char* e) {
  int error = errno;
  char line[4608];
  size_t size = compose(line, {a, b, c, d, e});
  if (!append_to_log(line, size)) write_line(STDERR_FILENO, line, size);
  errno = error;
}

void note(const char* a, const char* b, const char* c, const char* d, const char* e) {
  int error = errno;
  char line[4608];
  append_to_log(line, compose(line, {a, b, c, d, e}));
  errno = error;
}

int decimal_text(uint64_t value, char (&out)[24]) {
  char digits[24];
  int n = 0;
  for (uint64_t v = value; v || !n; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  for (int i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  out[n] = '\0';
  return n;
}

void pid_text(char (&out)[24]) { decimal_text(static_cast<uint64_t>(getpid()), out); }

}  // namespace runtime
}  // namespace heaptype
