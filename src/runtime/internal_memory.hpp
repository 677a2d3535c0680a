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

// Zero-filled, page-granular; nullptr when the kernel refuses.
void* map_pages(size_t bytes);
// The same, its pages made present at once: for a table that a hash spreads over all of
// them, where each first probe (a read, then a write) would fault twice per page.
void* map_pages_present(size_t bytes);
void unmap_pages(void* p, size_t bytes);

// The most bytes the runtime ever had mapped at once.
uint64_t bookkeeping_peak_bytes();

}  // namespace runtime
}  // namespace heaptype

#endif
