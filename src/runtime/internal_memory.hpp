// internal_memory.hpp: the runtime's own storage, straight from mmap.
//
// Nothing the runtime keeps may come from malloc or operator new: those are the
// functions it observes. Every byte mapped here is counted, so the profile can say
// what HeapType's bookkeeping cost per live block.
#ifndef HEAPTYPE_RUNTIME_INTERNAL_MEMORY_HPP
#define HEAPTYPE_RUNTIME_INTERNAL_MEMORY_HPP

#include <cstddef>
#include <cstdint>

namespace heaptype {
namespace runtime {

// What the runtime's memory is for: the profile's END chunk says how much of each
// was mapped when the runtime had the most (the overhead line of `heaptype report`).
enum class MemoryUse : unsigned {
  kEvents,      // the threads' event buffers and states
  kCallPaths,   // calling-context trees, shadow stacks, walk caches
  kSites,       // the threads' site tables
  kTypes,       // what each allocation call site allocates (call_site_types.hpp)
  kWriter,      // the profile's compression stream and /proc reads
  kOther,
  kCount
};

// Zero-filled, page-granular; nullptr when the kernel refuses.
void* map_pages(size_t bytes, MemoryUse use = MemoryUse::kOther);
// The same, its pages made present at once: for a table that a hash spreads over all of
// them, where each first probe (a read, then a write) would fault twice per page.
void* map_pages_present(size_t bytes, MemoryUse use = MemoryUse::kOther);
void unmap_pages(void* p, size_t bytes, MemoryUse use = MemoryUse::kOther);
// The pages at `p` grown to `bytes` (zero-filled beyond the old end), moved if need be:
// no copy, no new fault for the pages already touched. nullptr (and `p` kept) on failure.
void* grow_pages(void* p, size_t old_bytes, size_t bytes, MemoryUse use = MemoryUse::kOther);

// The most bytes the runtime ever had mapped at once.
uint64_t bookkeeping_peak_bytes();
// Fork: the counts' lock is held across fork() and released on both sides.
void bookkeeping_lock_for_fork();
void bookkeeping_unlock_after_fork();
// How those bytes were used at that moment, by MemoryUse.
void bookkeeping_peak_uses(uint64_t (&bytes)[static_cast<unsigned>(MemoryUse::kCount)]);

}  // namespace runtime
}  // namespace heaptype

#endif
