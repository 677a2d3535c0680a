// compressed_stream.hpp: the chunks of a compressed profile (format::kFlagZstd),
// decompressed into an unnamed temporary file that then stands for the profile.
//
// The reader indexes chunks by offset and reads them with pread(2) when they are
// needed (profile_file.hpp); a zstd stream is only read in order. Decompressing it
// once into a temporary file keeps everything after that as it is for a plain
// profile: offsets, the checks of damage, memory that does not grow with the file.
#ifndef HEAPTYPE_FORMAT_COMPRESSED_STREAM_HPP
#define HEAPTYPE_FORMAT_COMPRESSED_STREAM_HPP

#include <cstdint>
#include <string>

namespace heaptype {
namespace format {

struct Inflated {
  int fd = -1;                 // the temporary file: `prefix`, then the decompressed chunks
  uint64_t size = 0;           // its size
  uint64_t compressed_used = 0;  // bytes of the stream decoded, from its start
  bool finished = true;        // the stream ends where a frame ends (else: the process
                               // still writes, or stopped without finishing)
  std::string damage;          // "" unless the stream is damaged (everything before stands)
};

// Decompresses bytes [from, end) of `fd` into a new temporary file (in $TMPDIR, else
// /tmp) that starts with the `prefix_size` bytes at `prefix`. Throws std::runtime_error
// when no temporary file can be made or written.
Inflated inflate_to_temporary(int fd, uint64_t from, uint64_t end, const void* prefix, size_t prefix_size);

}  // namespace format
}  // namespace heaptype

#endif
