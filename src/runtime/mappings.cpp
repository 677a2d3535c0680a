#include "mappings.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "libc_next.hpp"

namespace heaptype {
namespace runtime {
namespace {

// <linux/fs.h> of Linux 6.11 (Debian 12's headers are older): PROCMAP_QUERY on an
// open /proc/PID/maps.
struct ProcmapQuery {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start;
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kVmaReadable = 1;

bool hex_field(const char*& p, const char* end, uintptr_t* out) {
  uintptr_t value = 0;
  const char* start = p;
  for (; p < end; ++p) {
    char c = *p;
    unsigned digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 16u;
    if (digit == 16) break;
    value = value << 4 | digit;
  }
  *out = value;
  return p > start;
}

// One line of /proc/self/maps: "start-end perms ...".
bool parse_line(const char* p, const char* end, uintptr_t* start, uintptr_t* stop, bool* readable) {
  if (!hex_field(p, end, start) || p >= end || *p++ != '-' || !hex_field(p, end, stop) || p >= end || *p++ != ' ')
    return false;
  *readable = p < end && *p == 'r';
  return true;
}

bool scan_maps(int fd, uintptr_t address, uintptr_t* start, uintptr_t* end) {
  char buffer[4096];
  size_t held = 0;
  for (;;) {
    ssize_t n = read(fd, buffer + held, sizeof buffer - held);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    held += static_cast<size_t>(n);
    char* line = buffer;
    char* const filled = buffer + held;
    for (char* newline; (newline = static_cast<char*>(std::memchr(line, '\n', filled - line)));
         line = newline + 1) {
      uintptr_t low, high;
      bool readable;
      if (!parse_line(line, newline, &low, &high, &readable)) return false;
      if (address < low) return false;  // the lines go up the address space
      if (address < high) {
        *start = low;
        *end = high;
        return readable;
      }
    }
    held = static_cast<size_t>(filled - line);
    if (held == sizeof buffer) return false;  // a line longer than the buffer: not a maps line
    std::memmove(buffer, line, held);
  }
}

}  // namespace

bool readable_mapping_of(uintptr_t address, uintptr_t* start, uintptr_t* end) {
  int saved = errno;
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  bool found = false;
  if (fd >= 0) {
    ProcmapQuery q;
    std::memset(&q, 0, sizeof q);
    q.size = sizeof q;
    q.query_addr = address;
    if (ioctl(fd, kProcmapQuery, &q) == 0) {
      found = (q.vma_flags & kVmaReadable) && q.vma_start <= address && address < q.vma_end;
      *start = q.vma_start;
      *end = q.vma_end;
    } else if (errno == ENOTTY || errno == EINVAL) {  // an older kernel
      found = scan_maps(fd, address, start, end);
    }
    close_own(fd);
  }
  errno = saved;
  return found;
}

}  // namespace runtime
}  // namespace heaptype
