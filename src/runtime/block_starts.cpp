#include "block_starts.hpp"

#include <sys/mman.h>

namespace heaptype {
namespace runtime {

std::atomic<uint8_t*> g_start_leaves[kLeafCount];

namespace {

// The leaves made, in the order made: what counts them reads these, not the whole top
// table (1 MiB of zero pages, a page fault each, in every process at exit).
constexpr size_t kListedLeaves = 1024;  // 1 TiB of heap span; a leaf beyond is not counted
std::atomic<uint8_t*> g_leaf_list[kListedLeaves];
std::atomic<size_t> g_leaves_made{0};

void list_leaf(uint8_t* leaf) {
  size_t i = g_leaves_made.fetch_add(1, std::memory_order_acq_rel);
  if (i < kListedLeaves) g_leaf_list[i].store(leaf, std::memory_order_release);
}

}  // namespace

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
    list_leaf(static_cast<uint8_t*>(fresh));
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
  size_t made = g_leaves_made.load(std::memory_order_acquire);
  for (size_t i = 0; i < made && i < kListedLeaves; ++i) {
    uint8_t* leaf = g_leaf_list[i].load(std::memory_order_acquire);
    if (!leaf) continue;  // being listed now
    for (size_t offset = 0; offset < kLeafBytes; offset += pages_per_call * page) {
      if (mincore(leaf + offset, pages_per_call * page, resident) != 0) continue;
      for (unsigned char r : resident) bytes += (r & 1) ? page : 0;
    }
  }
  return bytes;
}

}  // namespace runtime
}  // namespace heaptype
