#include "compressed_stream.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace heaptype {
namespace format {
namespace {

constexpr size_t kReadSize = 1u << 20;

std::string temporary_directory() {
  const char* dir = std::getenv("TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

// An unnamed file (O_TMPFILE), or a named one unlinked at once where the file
// system has no unnamed ones.
int open_temporary() {
  std::string dir = temporary_directory();
  int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string name = dir + "/heaptype-inflate-XXXXXX";
  fd = mkostemp(&name[0], O_CLOEXEC);
  if (fd >= 0) unlink(name.c_str());
  return fd;
}

void write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(std::string("cannot write the decompressed profile to ") +
                                         temporary_directory() + ": " + std::strerror(n < 0 ? errno : ENOSPC));
    p += n;
    size -= static_cast<size_t>(n);
  }
}

ssize_t read_at(int fd, void* out, size_t size, uint64_t offset) {
  for (;;) {
    ssize_t n = pread(fd, out, size, static_cast<off_t>(offset));
    if (n >= 0 || errno != EINTR) return n;
  }
}

struct DStream {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  ~DStream() { ZSTD_freeDCtx(ctx); }
};

}  // namespace

Inflated inflate_to_temporary(int fd, uint64_t from, uint64_t end, const void* prefix, size_t prefix_size) {
  Inflated result;
  result.fd = open_temporary();
  if (result.fd < 0)
    throw std::runtime_error("cannot create a temporary file in " + temporary_directory() +
                             " to decompress the profile: " + std::strerror(errno));
  try {
    write_all(result.fd, prefix, prefix_size);
    result.size = prefix_size;
    DStream stream;
    if (!stream.ctx) throw std::runtime_error("out of memory for the decompressor");
    std::vector<uint8_t> in(kReadSize), out(ZSTD_DStreamOutSize());
    uint64_t offset = from;
    while (offset < end && result.damage.empty()) {
      size_t want = static_cast<size_t>(end - offset < kReadSize ? end - offset : kReadSize);
      ssize_t got = read_at(fd, in.data(), want, offset);
      if (got <= 0) {
        result.damage = "read error at offset " + std::to_string(offset);
        break;
      }
      ZSTD_inBuffer input = {in.data(), static_cast<size_t>(got), 0};
      // Until the input is used up and the decoder has nothing more to give.
      for (bool more = true; more;) {
        ZSTD_outBuffer output = {out.data(), out.size(), 0};
        size_t hint = ZSTD_decompressStream(stream.ctx, &output, &input);
        if (ZSTD_isError(hint)) {
          result.damage = "the compressed stream is damaged near offset " + std::to_string(offset + input.pos) +
                          " (" + ZSTD_getErrorName(hint) + ")";
          break;
        }
        write_all(result.fd, out.data(), output.pos);
        result.size += output.pos;
        result.finished = hint == 0;
        more = input.pos < input.size || output.pos == output.size;
      }
      offset += static_cast<uint64_t>(got);
    }
    result.compressed_used = offset - from;
  } catch (...) {
    close(result.fd);
    throw;
  }
  return result;
}

}  // namespace format
}  // namespace heaptype
