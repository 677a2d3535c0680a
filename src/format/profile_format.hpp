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
// stream, split over that thread's chunks in file order; decoding state (the site
// table, the node table, the clock, the last address) runs on across a thread's
// chunks.
//
// Blocks are named by their SITE, not one by one. A site is what an allocation has
// in common with others of its kind (size, type, object count, call site, calling
// context); each thread numbers the sites it uses from 0. The runtime remembers the
// (thread, site) of every live block, and a free names that pair. So the reader
// needs no table of live blocks: its memory grows with the number of distinct
// sites, never with the number of blocks, and a free matches exactly whatever
// order the threads' chunks reach the file in.
//
// Every record starts with a varint `v`:
//
//   v & 1 == 1   ALLOC     one block of this thread's site (v >> 1)
//   v & 3 == 0   FREE      one block of this thread's site (v >> 2) is freed
//   v & 3 == 2   CONTROL   op = v >> 2, operands follow (see ControlOp)
//
// With kFlagAddresses set in the file header, ALLOC, FREE, FREE_REMOTE and MOVE
// are followed by the block's address, as a zigzag varint of its distance from
// the address of the thread's previous ALLOC record (see encode_address_delta).
// Without it (the default) the profile holds no addresses.
//
// Version 3 writes numbers as distances where they repeat from record to record
// (a real program's call paths are many, and each is the last one's neighbour):
// ALLOC and FREE name their site by its distance from the newest site the thread
// defined (zigzag: 0 is that site), and a NODE or SITE names its parent or node by
// distance from the newest node, its addresses by distance from the stream's
// previous ones (see StreamDeltas). Version 2 wrote them as they are; the reader
// reads both. Version 4 has version 3's records; its aggregated profiles may hold
// RETIRED and SURVIVORS chunks, and TALLIES that start above site 0 (ChunkKind).
//
// With kFlagZstd set, everything after the file header is one zstd stream of the
// chunks, flushed whole at every write: a file cut short decodes up to its last
// flush. Without it, a ZSTD_FOLLOWS chunk starts such a stream after plain chunks.
#ifndef HEAPTYPE_PROFILE_FORMAT_HPP
#define HEAPTYPE_PROFILE_FORMAT_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace heaptype {
namespace format {

// The call site of the outermost node of a walked stack whose callers went on past the
// frames a walk keeps (64 to 128, runtime/call_context.hpp): no code lies in the first page.
constexpr uint64_t kWalkCut = 1;

constexpr char kFileMagic[8] = {'H', 'E', 'A', 'P', 'T', 'Y', 'P', 'E'};
constexpr uint32_t kVersion = 4;
constexpr uint32_t kOldestVersion = 2;  // the oldest the reader reads
constexpr uint32_t kChunkMagic = 0x4b435448u;  // "HTCK" little-endian
constexpr uint32_t kMaxChunkPayload = 1u << 24;  // sanity bound for the reader

// FileHeader::flags
constexpr uint32_t kFlagAddresses = 1u << 0;  // records carry block addresses
constexpr uint32_t kFlagZstd = 1u << 1;       // the chunks are a zstd stream
constexpr uint32_t kFlagAggregated = 1u << 2; // counts instead of events (TALLIES, AGGREGATE)
// Bits 8-9: how the runtime came into the process (RuntimeMode). Files written
// before these bits existed hold 0 there: linked.
constexpr unsigned kModeShift = 8;
constexpr uint32_t kModeMask = 3u << kModeShift;

enum class RuntimeMode : uint32_t {
  kLinked = 0,     // linked into the program (built with HeapType's flags)
  kPreloaded = 1,  // LD_PRELOAD into a program that does not link it
  kAttached = 2,   // loaded into a running process (heaptype attach): blocks from
                   // before the attach are unknown
};

inline RuntimeMode runtime_mode(uint32_t flags) {
  return static_cast<RuntimeMode>((flags & kModeMask) >> kModeShift);
}
inline uint32_t mode_flags(RuntimeMode mode) { return static_cast<uint32_t>(mode) << kModeShift; }

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_size;        // sizeof(FileHeader): lets later versions grow it
  uint64_t pid;
  uint64_t start_unix_ns;      // wall clock at start, for humans
  uint64_t clock_tick_ns;      // unit of TIME deltas
  uint32_t pointer_size;
  uint32_t flags;              // kFlag*
  uint64_t reserved[2];
};
static_assert(sizeof(FileHeader) == 64, "file header is 64 bytes");

enum class ChunkKind : uint8_t {
  kProgram = 1,   // payload: executable path, NUL, then argv joined by NUL
  kModules = 2,   // payload: text lines "start end offset perms path" (hex numbers)
  kThread = 3,    // payload: varint os_tid, then thread name bytes
  kEvents = 4,    // payload: records of ChunkHeader::thread (see above)
  // 5 was the list of live blocks of version 1; the reader knows them from the events.
  kEnd = 6,       // payload: varints allocations, frees, untracked frees, peak bytes of
                  //          the runtime's buffers and tables, bytes of the registry, then
                  //          (since version 3) what those peak bytes were for, a varint per
                  //          EndUse; marks a finished profile
  kTallies = 7,   // aggregated profiles (kFlagAggregated): the counts of sites of thread
                  //          ChunkHeader::thread: varint first site, varint count, then per
                  //          site varints allocations, temporary allocations, blocks live
                  //          now, blocks live at the peak. A thread's chunks in a set follow
                  //          each other up its site numbers (each starting at or after where
                  //          the last ended; before version 4, from 0 without gaps). One set of them (every thread's sites) is closed by an
                  //          AGGREGATE chunk; the last whole set is the profile's.
  kAggregate = 8, // closes a set of TALLIES: varints time (clock ticks), live bytes, live
                  //          blocks, peak bytes (the whole heap's, exact), peak time, the
                  //          most blocks live at once, then a varint count of types and per
                  //          type varints type tag, its own peak bytes, their time.
                  //          Event chunks of an aggregated profile hold definitions (SITE,
                  //          NODE, DERIVED_SITE), findings, and the events that came after
                  //          the END chunk (static destructors) as a full profile has them.
  kRetired = 9,   // aggregated profiles: the final counts of sites no thread counts again
                  //          (of a generation its thread forgot, with no block live): varint
                  //          the heap's peak bytes when written, then per site varints
                  //          thread, site (zigzag distances from the entry before; the first
                  //          from 0, 0), allocations, temporary allocations, blocks live at
                  //          that peak (0 if the profile's peak is another). Written once per
                  //          site, outside sets; those before the last whole set count with it.
  kSurvivors = 10,// part of a set: the counts of sites of forgotten generations that still
                  //          have live blocks: per site varints thread, site (as RETIRED's),
                  //          allocations, temporary allocations, blocks live now, blocks live
                  //          at the peak.
  kZstdFollows = 11, // no payload, in a file without kFlagZstd (version 4): everything after
                  //          it is one zstd stream of chunks, as kFlagZstd's (an aggregated
                  //          profile that grew large goes on compressed)
  kSnapshot = 16, // payload: varint time (clock ticks since the start): the program was
                  //          asked for a snapshot (HEAPTYPE_SIGNAL); every event before it
                  //          in time is in the file before this chunk
};

// What the runtime's memory was for at its peak, in the END chunk's order.
enum class EndUse : unsigned {
  kEvents,       // event buffers and thread states
  kCallPaths,    // calling-context trees, shadow stacks, walk caches
  kSites,        // site tables
  kTypes,        // what each allocation call site allocates
  kWriter,       // the compression stream, /proc reads
  kOther,
  kBlockStarts,  // the table of block starts (resident pages)
  kCount
};
constexpr size_t kEndFields = 5 + static_cast<size_t>(EndUse::kCount);

// What ended the profile: the END chunk's field after the EndUse ones (an END chunk
// without it, written before it was kept, ended at exit). A reader takes an unknown
// value for an exit.
enum class EndCause : uint8_t {
  kExit = 0,  // the process exited (or a detach ended the profiling)
  kExec = 1,  // an exec replaced the process's image (exec_hooks.cpp)
  kDump = 2,  // heaptype_dump(): a copy of the profile so far, the process goes on
};
constexpr size_t kEndFieldsWithCause = kEndFields + 1;

struct ChunkHeader {
  uint32_t magic;
  uint8_t kind;
  uint8_t reserved[3];
  uint32_t thread;        // HeapType's thread number (1, 2, ...); 0 for process data
  uint32_t payload_size;
};
static_assert(sizeof(ChunkHeader) == 16, "chunk header is 16 bytes");

enum class ControlOp : uint8_t {
  kFreeLast = 0,     // no operands: the thread frees the block it allocated last, and
                     // it has allocated nothing since (other frees may have come
                     // between: a temporary only when none did, core/temporaries.hpp). The
                     // block is at the site of the thread's last ALLOC record, or
                     // where a MOVE of this thread's took it since: a MOVE naming
                     // (this thread, that site) moves the last allocated block. In
                     // address mode its address is that record's address.
  kTime = 1,         // varint: clock ticks since this thread's previous TIME
  kSite = 2,         // defines this thread's next site number:
                     //   varint size, varint count, varint type tag, varint call site,
                     //   varint calling-context node (0: none)
                     // version 3: type tag and call site as zigzag distances from the
                     // stream's previous type tag and code address, the node as the
                     // newest node's number minus it
  kNode = 3,         // defines this thread's next calling-context node (numbered from
                     // 1; 0 is the thread's root): varint parent node, varint function
                     // entered (0 when only the return address is known), varint call
                     // site (the return address in the caller)
                     // version 3: the new node's number minus the parent's, then
                     // function and call site as zigzag distances from the stream's
                     // previous function and code address. Call site kWalkCut: a
                     // walked stack's callers past the frames a walk keeps.
  kFreeRemote = 4,   // varint thread, varint site: a block of another thread's site
  kDerivedSite = 5,  // defines this thread's next site number as another thread's site
                     // with a new type: varint thread, varint site, varint type tag,
                     // varint count. Size and calling context are the other site's
                     // (calling-context nodes are numbered per thread).
  kMove = 6,         // varint thread, varint site, varint new site (of this thread):
                     // one block counted at the first site is counted at the new one
                     // from now on. The runtime moves a block when it learns its type
                     // late (its constructor allocated first, or heaptype::tag<T>),
                     // and later frees name the new site.
  kStack = 7,        // varint bytes: the deepest this thread's stack went (from the top
                     // of its stack to the deepest frame the runtime saw: at
                     // allocations, and at function entries in instrument mode) during
                     // the clock tick of the records before it. Written when it changes.
  kFinding = 8,      // a release the program got wrong, passed on to the allocator all the
                     // same: varint kind (FindingKind), varint thread, varint site (the
                     // block's, as FREE_REMOTE names it; thread 0 when the block was not
                     // recorded), varint a, varint b (see FindingKind), varint call site
                     // (the return address of the release call), varint calling-context
                     // node of this thread (0: none). Readers that predate it stop at it.
};

// What a FINDING record found.
enum class FindingKind : uint8_t {
  kMismatchedDelete = 0,  // a delete (or delete[]) whose static type's size disagrees with
                          // the block's: a = the static type's tag (as a site's), b = the
                          // bytes it says (sizeof(T), or the array's with its cookie).
                          // Only the type-aware capture mode sees static types at delete.
  kMismatchedFree = 1,    // free(), delete or delete[] of a block another family made:
                          // a = how it was allocated, b = how it was released (AllocFamily)
};

// The allocation function families of kMismatchedFree.
enum class AllocFamily : uint8_t {
  kMalloc = 0,  // malloc / free
  kNew = 1,     // operator new / delete
  kArray = 2,   // operator new[] / delete[]
};

// A site is what an allocation has in common with others of its kind.
struct Site {
  uint64_t size;
  uint64_t count;      // objects in the block: n for T[n], 1 otherwise, 0 if untyped
  uint64_t type_tag;   // runtime address of heaptype::type_id<T>::tag, 0 if untyped
  uint64_t call_site;  // return address of the allocation call
  uint64_t node;       // the thread's calling-context node of the allocation (0: none)
};

// --- varints: LEB128, 7 bits a byte, least significant group first -----------------

constexpr size_t kMaxVarint = 10;
constexpr size_t kMaxRecordSize = 64;  // a SITE fits with room
constexpr size_t kMaxFindingRecordSize = 8 * kMaxVarint;  // the largest record: a FINDING

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

// Reads one varint from [*pos, end); false when the buffer ends inside it, or when
// it has more than ten bytes.
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

// --- record heads -------------------------------------------------------------------

// `site`: version 2 the site's number, version 3 site_distance().
inline uint64_t alloc_record_head(uint64_t site) { return (site << 1) | 1u; }
inline uint64_t free_record_head(uint64_t site) { return site << 2; }

// --- version 3's distances ------------------------------------------------------------

// A site named by its distance from the newest one the thread defined.
inline uint64_t site_distance(uint32_t newest, uint32_t site) {
  return zigzag(static_cast<int64_t>(newest) - static_cast<int64_t>(site));
}
// A 32-bit number moved by a zigzag distance, forward (moved_forward) or back
// (site_from_distance). A damaged distance may be any 64-bit value, so the sum is taken
// in wrapping arithmetic, where a signed one could overflow; every result in the 32-bit
// range is still the true sum, and every other result is out of it.
inline int64_t moved_forward(uint32_t base, uint64_t distance) {
  return static_cast<int64_t>(uint64_t{base} + static_cast<uint64_t>(unzigzag(distance)));
}
inline int64_t site_from_distance(uint32_t newest, uint64_t distance) {
  return static_cast<int64_t>(uint64_t{newest} - static_cast<uint64_t>(unzigzag(distance)));
}

// The values a thread's stream numbers from (writer and reader keep the same).
struct StreamDeltas {
  uint64_t code = 0;      // the previous NODE's or SITE's call site
  uint64_t function = 0;  // the previous NODE's function
  uint64_t type = 0;      // the previous SITE's type tag
};

inline uint64_t delta_from(uint64_t* previous, uint64_t value) {
  uint64_t d = zigzag(static_cast<int64_t>(value - *previous));
  *previous = value;
  return d;
}
inline uint64_t value_from(uint64_t* previous, uint64_t delta) {
  *previous += static_cast<uint64_t>(unzigzag(delta));
  return *previous;
}
inline uint64_t control_record_head(ControlOp op) { return (static_cast<uint64_t>(op) << 2) | 2u; }

// Address mode: a block's address as its distance from `base` (the thread's last
// ALLOC address), in 16-byte units when it is a multiple of 16 (bit 0 clear), in
// bytes otherwise (bit 0 set).
constexpr unsigned kAddressUnitShift = 4;

inline uint64_t encode_address_delta(uint64_t address, uint64_t base) {
  int64_t delta = static_cast<int64_t>(address - base);
  if ((delta & ((int64_t{1} << kAddressUnitShift) - 1)) == 0)
    return zigzag(delta >> kAddressUnitShift) << 1;
  return (zigzag(delta) << 1) | 1u;
}

inline uint64_t decode_address_delta(uint64_t v, uint64_t base) {
  int64_t delta = unzigzag(v >> 1);
  if (!(v & 1)) delta = static_cast<int64_t>(static_cast<uint64_t>(delta) << kAddressUnitShift);
  return base + static_cast<uint64_t>(delta);
}

}  // namespace format
}  // namespace heaptype

#endif
