// profile_format.hpp: the HeapType profile file, one contract for writer and reader.
//
// A profile is a fixed file header followed by self-delimiting chunks. Chunks are
// appended whole with one write(2) each, so a process that dies mid-run leaves a
// file whose every complete chunk is valid: the reader loads up to the last whole
// chunk and reports how many bytes it had to drop.
//
//   FileHeader                      64 bytes, little-endian
//   { ChunkHeader, payload }*       payload_size bytes each
//
// Event chunks carry the records of one thread. Each thread's records form one
// stream, split over that thread's chunks in file order; decoding state (the
// allocation counter, the last address, the site table, the clock) runs on across
// a thread's chunks. Every record starts with a varint `v`:
//
//   v & 1 == 0   FREE       free of this thread's allocation number (k - (v >> 1)),
//                           where k counts the thread's allocations so far
//   v & 3 == 1   ALLOC      site = v >> 3; then zigzag varint: address delta from the
//                           thread's previous allocation, in 16-byte units when
//                           bit 2 is 0, in bytes when bit 2 is 1. Its number is k++.
//   v & 3 == 3   CONTROL    op = v >> 2, operands follow (see ControlOp)
//
// Allocations are named by (thread, number) rather than by address, so a block
// freed by another thread, or an address reused across threads, is matched exactly
// whatever order the threads' chunks reach the file.
#ifndef HEAPTYPE_PROFILE_FORMAT_HPP
#define HEAPTYPE_PROFILE_FORMAT_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace heaptype {
namespace format {

constexpr char kFileMagic[8] = {'H', 'E', 'A', 'P', 'T', 'Y', 'P', 'E'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kChunkMagic = 0x4b435448u;  // "HTCK" little-endian
constexpr uint32_t kMaxChunkPayload = 1u << 24;  // sanity bound for the reader

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_size;        // sizeof(FileHeader): lets later versions grow it
  uint64_t pid;
  uint64_t start_unix_ns;      // wall clock at start, for humans
  uint64_t clock_tick_ns;      // unit of TIME deltas
  uint32_t pointer_size;
  uint32_t flags;
  uint64_t reserved[2];
};
static_assert(sizeof(FileHeader) == 64, "file header is 64 bytes");

enum class ChunkKind : uint8_t {
  kProgram = 1,   // payload: executable path, NUL, then argv joined by NUL
  kModules = 2,   // payload: text lines "start end offset perms path" (hex numbers)
  kThread = 3,    // payload: varint os_tid, then thread name bytes
  kEvents = 4,    // payload: records of ChunkHeader::thread (see above)
  kLive = 5,      // payload: varint pairs (thread, allocation number), one for each
                  //          block live when the profile was finished
  kEnd = 6,       // payload: varints allocations, frees, untracked frees, peak bytes of
                  //          the runtime's buffers and tables, bytes of the registry's
                  //          shadow table; marks a finished profile
};

struct ChunkHeader {
  uint32_t magic;
  uint8_t kind;
  uint8_t reserved[3];
  uint32_t thread;        // HeapType's thread number (1, 2, ...); 0 for process data
  uint32_t payload_size;
};
static_assert(sizeof(ChunkHeader) == 16, "chunk header is 16 bytes");

enum class ControlOp : uint8_t {
  kTime = 0,         // varint: clock ticks since this thread's previous TIME
  kSite = 1,         // defines this thread's next site number:
                     //   varint size, varint count, varint type tag, varint call site,
                     //   varint calling-context node (0: none)
  kFreeRemote = 2,   // varint thread, varint allocation number (another thread's block)
  kRetype = 3,       // a new-expression's type for a block committed untyped (its
                     // constructor allocated first, or placement new reused it):
                     //   varint thread, varint number, varint type tag, varint element
                     //   size, varint offset of the object in the block (0, or the
                     //   array cookie's size), varint the cookie's count word.
                     // The reader applies it only to a block still untyped, and
                     // only if size == offset + count * element size.
  kName = 4,         // heaptype::tag<T>(p, n) on a tracked block, applied always:
                     //   varint thread, varint number, varint type tag, varint count
  kNode = 5,         // defines this thread's next calling-context node (numbered from
                     // 1; 0 is the thread's root): varint parent node, varint function
                     // entered (0 when only the return address is known), varint call
                     // site (the return address in the caller)
};

// A site is what an allocation has in common with others of its kind; each
// thread numbers the sites it uses from 0 in the order it first uses them.
struct Site {
  uint64_t size;
  uint64_t count;      // objects in the block: n for T[n], 1 otherwise, 0 if untyped
  uint64_t type_tag;   // runtime address of heaptype::type_id<T>::tag, 0 if untyped
  uint64_t call_site;  // return address of the allocation call
  uint64_t node;       // the thread's calling-context node of the allocation (0: none)
};

constexpr uint64_t kAllocUnitShift = 4;  // malloc blocks are 16-byte aligned

// --- varints: LEB128, 7 bits a byte, least significant group first -----------------

constexpr size_t kMaxVarint = 10;

inline uint8_t* put_varint(uint8_t* out, uint64_t v) {
  while (v >= 0x80) {
    *out++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *out++ = static_cast<uint8_t>(v);
  return out;
}

inline uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

inline int64_t unzigzag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

// Reads one varint from [*pos, end); false when the buffer ends inside it.
inline bool get_varint(const uint8_t** pos, const uint8_t* end, uint64_t* out) {
  uint64_t v = 0;
  unsigned shift = 0;
  const uint8_t* p = *pos;
  while (p < end && shift < 64) {
    uint8_t byte = *p++;
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) {
      *pos = p;
      *out = v;
      return true;
    }
    shift += 7;
  }
  return false;
}

inline uint64_t alloc_record_head(uint64_t site, bool byte_units) {
  return (site << 3) | (byte_units ? 5u : 1u);
}

inline uint64_t control_record_head(ControlOp op) {
  return (static_cast<uint64_t>(op) << 2) | 3u;
}

}  // namespace format
}  // namespace heaptype

#endif
