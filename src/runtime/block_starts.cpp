#include "block_starts.hpp"

#include <sys/mman.h>

namespace heaptype {
namespace runtime {

std::atomic<uint8_t*> g_start_leaves[kLeafCount];

uint8_t* start_leaf(uintptr_t p) {
  if (p >> kAddressBits) return nullptr;
  std::atomic<uint8_t*>& slot = g_start_leaves[p >> kLeafShift];
  uint8_t* leaf = slot.load(std::memory_order_acquire);
  if (leaf) return leaf;
  // Reserved, not committed: the kernel backs a page when a mark first touches it.
  void* fresh = mmap(nullptr, kLeafBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (fresh == MAP_FAILED) return nullptr;
  madvise(fresh, kLeafBytes, MADV_NOHUGEPAGE);  // a mark must not make 2 MiB present
  if (slot.compare_exchange_strong(leaf, static_cast<uint8_t*>(fresh), std::memory_order_acq_rel)) {
    return static_cast<uint8_t*>(fresh);
  }
  munmap(fresh, kLeafBytes);  // another thread's leaf won
  return leaf;
}

uint64_t block_starts_resident_bytes() {
  const size_t page = 4096;
  const size_t pages_per_call = 1024;
  unsigned char resident[pages_per_call];
  uint64_t bytes = 0;
  for (size_t i = 0; i < kLeafCount; ++i) {
    uint8_t* leaf = g_start_leaves[i].load(std::memory_order_acquire);
    if (!leaf) continue;
    for (size_t offset = 0; offset < kLeafBytes; offset += pages_per_call * page) {
      if (mincore(leaf + offset, pages_per_call * page, resident) != 0) continue;
      for (unsigned char r : resident) bytes += (r & 1) ? page : 0;
    }
  }
  return bytes;
}

}  // namespace runtime
}  // namespace heaptype
