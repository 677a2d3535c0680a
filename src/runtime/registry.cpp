#include "registry.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "internal_memory.hpp"

namespace heaptype {
namespace runtime {
namespace {

constexpr unsigned kGranuleBits = 3;   // one owner word per 8 bytes
constexpr unsigned kRegionBits = 26;   // 64 MiB of heap per leaf
constexpr unsigned kAddressBits = 48;
constexpr size_t kLeafWords = size_t{1} << (kRegionBits - kGranuleBits);
constexpr size_t kLeafBytes = kLeafWords * sizeof(uint64_t);
constexpr size_t kDirectorySize = size_t{1} << (kAddressBits - kRegionBits);

using Leaf = std::atomic<uint64_t>;

std::atomic<Leaf*>* g_directory = nullptr;

// The regions that have a leaf, so that finishing visits them without scanning
// the directory. 48-bit address space / 64 MiB regions bounds the count.
constexpr size_t kMaxLeaves = 4096;
std::atomic<uint32_t> g_leaf_regions[kMaxLeaves];
std::atomic<size_t> g_leaf_count{0};

void* reserve(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

inline size_t region_of(uintptr_t address) { return (address >> kRegionBits) & (kDirectorySize - 1); }
inline size_t word_of(uintptr_t address) { return (address >> kGranuleBits) & (kLeafWords - 1); }

inline Leaf* leaf_if_any(uintptr_t address) {
  return g_directory ? g_directory[region_of(address)].load(std::memory_order_acquire) : nullptr;
}

Leaf* leaf_for_insert(uintptr_t address) {
  std::atomic<Leaf*>& slot = g_directory[region_of(address)];
  Leaf* leaf = slot.load(std::memory_order_acquire);
  if (__builtin_expect(leaf != nullptr, 1)) return leaf;
  Leaf* fresh = static_cast<Leaf*>(reserve(kLeafBytes));
  if (!fresh) return nullptr;
  if (slot.compare_exchange_strong(leaf, fresh, std::memory_order_acq_rel)) {
    size_t index = g_leaf_count.fetch_add(1);
    if (index < kMaxLeaves) g_leaf_regions[index].store(static_cast<uint32_t>(region_of(address)));
    return fresh;
  }
  munmap(fresh, kLeafBytes);  // another thread installed this leaf first
  return leaf;
}

template <class F>
void for_each_leaf(F&& f) {
  if (!g_directory) return;
  size_t count = g_leaf_count.load();
  if (count > kMaxLeaves) count = kMaxLeaves;
  for (size_t i = 0; i < count; ++i) {
    uint32_t region = g_leaf_regions[i].load();
    if (Leaf* leaf = g_directory[region].load(std::memory_order_acquire)) f(region, leaf);
  }
}

// Calls f(page_index) for each resident page of a leaf.
template <class F>
void for_each_resident_page(Leaf* leaf, F&& f) {
  const size_t page = 4096;
  const size_t pages = kLeafBytes / page;
  unsigned char* residency = static_cast<unsigned char*>(map_pages(pages));
  if (!residency) return;
  if (mincore(leaf, kLeafBytes, residency) == 0)
    for (size_t i = 0; i < pages; ++i)
      if (residency[i] & 1) f(i);
  unmap_pages(residency, pages);
}

}  // namespace

bool registry_init() {
  if (g_directory) return true;
  g_directory = static_cast<std::atomic<Leaf*>*>(reserve(kDirectorySize * sizeof(Leaf*)));
  return g_directory != nullptr;
}

uint64_t registry_insert(uintptr_t address, uint64_t owner) {
  Leaf* leaf = leaf_for_insert(address);
  if (!leaf) return 0;
  Leaf& word = leaf[word_of(address)];
  uint64_t stale = word.load(std::memory_order_relaxed);
  word.store(owner, std::memory_order_relaxed);
  return stale;
}

uint64_t registry_remove(uintptr_t address) {
  Leaf* leaf = leaf_if_any(address);
  if (!leaf) return 0;
  Leaf& word = leaf[word_of(address)];
  uint64_t owner = word.load(std::memory_order_relaxed);
  if (owner) word.store(0, std::memory_order_relaxed);
  return owner;
}

uint64_t registry_lookup(uintptr_t address) {
  Leaf* leaf = leaf_if_any(address);
  return leaf ? leaf[word_of(address)].load(std::memory_order_relaxed) : 0;
}

void registry_for_each(void (*visit)(uintptr_t, uint64_t, void*), void* context) {
  for_each_leaf([&](size_t region, Leaf* leaf) {
    for_each_resident_page(leaf, [&](size_t page) {
      const size_t words_per_page = 4096 / sizeof(uint64_t);
      for (size_t w = page * words_per_page; w < (page + 1) * words_per_page; ++w) {
        uint64_t owner = leaf[w].load(std::memory_order_relaxed);
        if (owner) visit((static_cast<uintptr_t>(region) << kRegionBits) | (w << kGranuleBits), owner, context);
      }
    });
  });
}

uint64_t registry_resident_bytes() {
  uint64_t bytes = 0;
  for_each_leaf([&](size_t, Leaf* leaf) { for_each_resident_page(leaf, [&](size_t) { bytes += 4096; }); });
  return bytes;
}

void registry_clear_in_child() {
  for_each_leaf([](size_t, Leaf* leaf) { madvise(leaf, kLeafBytes, MADV_DONTNEED); });
}

}  // namespace runtime
}  // namespace heaptype
