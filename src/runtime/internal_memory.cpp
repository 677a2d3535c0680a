#include "internal_memory.hpp"

#include <sys/mman.h>

#include <atomic>

#include "sanitizer.hpp"

#ifdef HEAPTYPE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace heaptype {
namespace runtime {
namespace {

std::atomic<uint64_t> g_mapped{0};
std::atomic<uint64_t> g_mapped_peak{0};

size_t round_to_pages(size_t bytes) {
  const size_t page = 4096;
  return (bytes + page - 1) & ~(page - 1);
}

void* map_with(size_t bytes, int flags) {
  bytes = round_to_pages(bytes);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef HEAPTYPE_LSAN
  __lsan_register_root_region(p, bytes);  // it names blocks on probation, freed by the program
#endif
  uint64_t now = g_mapped.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  uint64_t peak = g_mapped_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_mapped_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return p;
}

}  // namespace

void* map_pages(size_t bytes) { return map_with(bytes, 0); }

void* map_pages_present(size_t bytes) { return map_with(bytes, MAP_POPULATE); }

void unmap_pages(void* p, size_t bytes) {
  if (!p) return;
  bytes = round_to_pages(bytes);
#ifdef HEAPTYPE_LSAN
  __lsan_unregister_root_region(p, bytes);
#endif
  munmap(p, bytes);
  g_mapped.fetch_sub(bytes, std::memory_order_relaxed);
}

uint64_t bookkeeping_peak_bytes() { return g_mapped_peak.load(std::memory_order_relaxed); }

}  // namespace runtime
}  // namespace heaptype
