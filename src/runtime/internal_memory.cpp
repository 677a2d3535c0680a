#include "internal_memory.hpp"

#include <sys/mman.h>

#include <cstring>

#include "sanitizer.hpp"
#include "spinlock.hpp"

#ifdef HEAPTYPE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace heaptype {
namespace runtime {
namespace {

constexpr unsigned kUses = static_cast<unsigned>(MemoryUse::kCount);

// Mappings are rare (tables that grow, threads that start): one lock keeps the
// counts and the breakdown at the peak consistent. A signal handler's allocation may
// map memory on the thread that holds it: it is held with signals blocked.
SpinLock g_count_lock;
uint64_t g_mapped = 0;
uint64_t g_mapped_peak = 0;
uint64_t g_mapped_by_use[kUses];
uint64_t g_peak_by_use[kUses];

void count_mapped(MemoryUse use, uint64_t bytes, bool mapped) {
  BlockedSignals blocked;
  LockGuard guard(g_count_lock);
  unsigned i = static_cast<unsigned>(use);
  if (mapped) {
    g_mapped += bytes;
    g_mapped_by_use[i] += bytes;
    if (g_mapped > g_mapped_peak) {
      g_mapped_peak = g_mapped;
      std::memcpy(g_peak_by_use, g_mapped_by_use, sizeof g_peak_by_use);
    }
  } else {
    g_mapped -= bytes;
    g_mapped_by_use[i] -= bytes;
  }
}

size_t round_to_pages(size_t bytes) {
  const size_t page = 4096;
  return (bytes + page - 1) & ~(page - 1);
}

void* map_with(size_t bytes, int flags, MemoryUse use) {
  bytes = round_to_pages(bytes);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef HEAPTYPE_LSAN
  __lsan_register_root_region(p, bytes);  // it names blocks on probation, freed by the program
#endif
  count_mapped(use, bytes, true);
  return p;
}

}  // namespace

void* map_pages(size_t bytes, MemoryUse use) { return map_with(bytes, 0, use); }

void* map_pages_present(size_t bytes, MemoryUse use) { return map_with(bytes, MAP_POPULATE, use); }

void unmap_pages(void* p, size_t bytes, MemoryUse use) {
  if (!p) return;
  bytes = round_to_pages(bytes);
#ifdef HEAPTYPE_LSAN
  __lsan_unregister_root_region(p, bytes);
#endif
  munmap(p, bytes);
  count_mapped(use, bytes, false);
}

void* grow_pages(void* p, size_t old_bytes, size_t bytes, MemoryUse use) {
  if (!p) return map_pages(bytes, use);
  old_bytes = round_to_pages(old_bytes);
  bytes = round_to_pages(bytes);
  void* moved = mremap(p, old_bytes, bytes, MREMAP_MAYMOVE);
  if (moved == MAP_FAILED) return nullptr;
#ifdef HEAPTYPE_LSAN
  __lsan_unregister_root_region(p, old_bytes);
  __lsan_register_root_region(moved, bytes);
#endif
  count_mapped(use, bytes - old_bytes, true);
  return moved;
}

uint64_t bookkeeping_peak_bytes() {
  BlockedSignals blocked;
  LockGuard guard(g_count_lock);
  return g_mapped_peak;
}

void bookkeeping_lock_for_fork() { g_count_lock.lock(); }
void bookkeeping_unlock_after_fork() { g_count_lock.unlock(); }

void bookkeeping_peak_uses(uint64_t (&bytes)[kUses]) {
  BlockedSignals blocked;
  LockGuard guard(g_count_lock);
  std::memcpy(bytes, g_peak_by_use, sizeof bytes);
}

}  // namespace runtime
}  // namespace heaptype
