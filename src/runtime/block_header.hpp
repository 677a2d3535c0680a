// block_header.hpp: the registry of live blocks, one 16-byte header in front of each.
//
// Every block the runtime hands out while profiling is active is allocated 16 bytes
// larger (or, for an alignment above 16, `alignment` bytes larger) and the header
// sits right before the pointer the program gets:
//
//   [ size (4) | seal (4) | owner (8) ][ the program's bytes ... ]
//                                      ^ p
//
// So the registry costs 16 bytes per live block whatever its size, needs no table
// that grows with the heap's address range, and a free finds its block's owner in
// the cache line glibc's free touches anyway (its chunk header is right below).
//
// Whether a pointer starts one of our blocks is known exactly from the table of
// block starts (block_starts.hpp), asked before anything reads a header: a pointer
// the runtime never handed out (allocated before profiling started, by
// __libc_malloc directly, by glibc's own loader, or an object the program placed in
// its own pool) is passed to glibc untouched, and nothing is ever written before it.
// The seal then checks the header itself: the block's address under a per-process
// secret, whose low 4 bits give the header's offset from the start of
// the glibc allocation and whose next 2 bits the function family that allocated it
// (malloc, operator new, operator new[]): a free(), delete or delete[] of another
// family is a finding (see Family).
//
// The owner word names the block's (thread, site): the allocating thread and its
// site number, which the profile's FREE records name. 0 is an untracked block
// (allocated while recording was stopped). The epoch changes in a forked child,
// whose profile starts empty: blocks of the parent are untracked there.
#ifndef HEAPTYPE_RUNTIME_BLOCK_HEADER_HPP
#define HEAPTYPE_RUNTIME_BLOCK_HEADER_HPP

#include <cstddef>
#include <cstdint>

#include "block_starts.hpp"
#include "sanitizer.hpp"

namespace heaptype {
namespace runtime {

struct BlockHeader {
  uint32_t size;   // the requested size, kSizeSaturated if it does not fit
  uint32_t seal;   // seal_of(address) | offset code
  uint64_t owner;  // see the owner word below; accessed with __atomic builtins
};
static_assert(sizeof(BlockHeader) == 16, "the header keeps 16-byte alignment");

constexpr size_t kHeaderSize = sizeof(BlockHeader);
constexpr uint32_t kSizeSaturated = 0xffffffffu;
constexpr unsigned kMaxOffsetCode = 15;  // offsets 16 << code: alignments up to 512 KiB

// Which function family allocated a block, and which one a release expects: a
// mismatch is Valgrind's "mismatched free() / delete / delete []". The values are
// the profile's (format::AllocFamily).
enum Family : unsigned {
  kFamilyMalloc = 0,  // malloc, calloc, realloc, aligned allocations: free()
  kFamilyNew = 1,     // operator new: delete
  kFamilyArray = 2,   // operator new[]: delete[]
  kFamilyAny = 3,     // (a release only) the runtime's own: no check
};
constexpr unsigned kFamilyShift = 4;

// --- the owner word ------------------------------------------------------------------
//   bits  0-31  site (the owning thread's site number)
//   bits 32-55  thread number (1, 2, ...)
//   bits 56-59  epoch (fork generation)
//   bit  60     typed: the site names a type
//   bit  61     on probation: the owning thread may still name its type; another
//               thread's free defers to the owner (see tracker.cpp)
//   bit  62     freed by another thread while on probation; the owner releases it
constexpr unsigned kThreadBits = 24;
constexpr uint32_t kMaxThreadNumber = (1u << kThreadBits) - 1;
constexpr uint64_t kOwnerTyped = uint64_t{1} << 60;
constexpr uint64_t kOwnerProbation = uint64_t{1} << 61;
constexpr uint64_t kOwnerFreed = uint64_t{1} << 62;
constexpr uint64_t kOwnerThreadAndEpoch = uint64_t{0xfffffff} << 32;

extern uint32_t g_epoch;  // 4 bits, incremented in a forked child

inline uint64_t make_owner(uint32_t thread, uint32_t site, bool typed) {
  return (static_cast<uint64_t>(g_epoch & 15) << 56) | (static_cast<uint64_t>(thread) << 32) | site |
         (typed ? kOwnerTyped : 0);
}
inline uint32_t owner_thread(uint64_t owner) { return static_cast<uint32_t>(owner >> 32) & kMaxThreadNumber; }
inline uint32_t owner_site(uint64_t owner) { return static_cast<uint32_t>(owner); }
inline bool owner_typed(uint64_t owner) { return (owner & kOwnerTyped) != 0; }
// Tracked in this process's profile: not 0, not a forked parent's.
inline bool owner_current(uint64_t owner) { return owner && ((owner >> 56) & 15) == (g_epoch & 15); }

// --- seal ------------------------------------------------------------------------------

extern uint64_t g_seal_secret;

// The address's low 32 bits under the secret's: for a given block a fixed 26-bit
// value that bytes the program wrote over the header match once in 2^26, as a hash
// would, in two instructions (the table of block starts, not the seal, decides what
// is ours).
inline uint32_t seal_of(uintptr_t p) { return static_cast<uint32_t>(p ^ g_seal_secret) & ~uint32_t{63}; }

inline BlockHeader* header_of(const void* p) {
  return reinterpret_cast<BlockHeader*>(reinterpret_cast<uintptr_t>(p) - kHeaderSize);
}

// The header of the block at p, or nullptr if p is not a block of ours: exact, and
// p may be any address (nothing before it is read unless a block of ours starts there).
// `mark`: where the table of block starts marks it (block_starts.hpp).
HEAPTYPE_NO_ASAN inline BlockHeader* sealed_header(const void* p, unsigned* offset_code, unsigned* family,
                                                   uint8_t** mark) {
  if (sanitizer_block(p)) return nullptr;  // sanitizer builds: a block of its own, not one of ours
  *mark = block_start_mark(p);
  if (!*mark) return nullptr;
  BlockHeader* h = header_of(p);
  // A marked block whose seal fails had its header overwritten by the program (an
  // underflow): it is not handled as ours.
  uint32_t code = h->seal ^ seal_of(reinterpret_cast<uintptr_t>(p));
  if (code >= (kFamilyAny << kFamilyShift)) return nullptr;
  *offset_code = code & kMaxOffsetCode;
  *family = code >> kFamilyShift;
  return h;
}

inline BlockHeader* sealed_header(const void* p, unsigned* offset_code, unsigned* family) {
  uint8_t* mark;
  return sealed_header(p, offset_code, family, &mark);
}

inline BlockHeader* sealed_header(const void* p, unsigned* offset_code) {
  unsigned family;
  return sealed_header(p, offset_code, &family);
}

inline size_t header_offset(unsigned offset_code) { return kHeaderSize << offset_code; }

// The start of the glibc allocation holding the block at p.
inline void* allocation_base(const void* p, unsigned offset_code) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) - header_offset(offset_code));
}

inline uint64_t load_owner(const BlockHeader* h) { return __atomic_load_n(&h->owner, __ATOMIC_RELAXED); }
inline void store_owner(BlockHeader* h, uint64_t owner) { __atomic_store_n(&h->owner, owner, __ATOMIC_RELAXED); }
// Only where two threads may race for a block on probation.
inline bool replace_owner(BlockHeader* h, uint64_t* expected, uint64_t owner) {
  return __atomic_compare_exchange_n(&h->owner, expected, owner, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

// `family`: the Family that allocated it (never kFamilyAny).
inline void write_header(void* p, size_t size, unsigned offset_code, unsigned family, uint64_t owner) {
  BlockHeader* h = header_of(p);
  h->size = size < kSizeSaturated ? static_cast<uint32_t>(size) : kSizeSaturated;
  h->seal = seal_of(reinterpret_cast<uintptr_t>(p)) | offset_code | (family << kFamilyShift);
  store_owner(h, owner);
}

}  // namespace runtime
}  // namespace heaptype

#endif
