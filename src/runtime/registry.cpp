#include "registry.hpp"

#include <atomic>
#include <cstring>

#include "internal_memory.hpp"
#include "spinlock.hpp"

namespace heaptype {
namespace runtime {
namespace {

constexpr unsigned kShardBits = 6;
constexpr size_t kShards = size_t{1} << kShardBits;
constexpr size_t kInitialSlots = 128;  // one page of entries
constexpr unsigned kRegionBits = 16;

struct alignas(64) Shard {
  SpinLock lock;
  Block* slots;
  size_t capacity;  // a power of two, or 0 before first use
  size_t used;
};

Shard g_shards[kShards];
std::atomic<uint64_t> g_live{0};
std::atomic<uint64_t> g_peak{0};

// Regions of 64 KiB are scattered over shards and over each table; inside a region
// the slot follows the address, 16 bytes a slot.
inline uint64_t region_hash(uintptr_t address) {
  uint64_t h = static_cast<uint64_t>(address >> kRegionBits) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 31);
}

inline uint64_t mix(uintptr_t address) {
  uint64_t region = region_hash(address);
  uint64_t slot = (address >> 4) + (region & 0xffffffffull);
  return (region & ~((~0ull) >> kShardBits)) | (slot & ((~0ull) >> kShardBits));
}

inline Shard& shard_for(uint64_t hash) { return g_shards[hash >> (64 - kShardBits)]; }

inline size_t home_slot(const Shard& shard, uint64_t hash) { return hash & (shard.capacity - 1); }

bool grow(Shard& shard) {
  size_t capacity = shard.capacity ? shard.capacity * 2 : kInitialSlots;
  Block* slots = static_cast<Block*>(map_pages(capacity * sizeof(Block)));
  if (!slots) return false;
  for (size_t i = 0; i < shard.capacity; ++i) {
    const Block& b = shard.slots[i];
    if (!b.address) continue;
    size_t j = mix(b.address) & (capacity - 1);
    while (slots[j].address) j = (j + 1) & (capacity - 1);
    slots[j] = b;
  }
  unmap_pages(shard.slots, shard.capacity * sizeof(Block));
  shard.slots = slots;
  shard.capacity = capacity;
  return true;
}

Block* find(Shard& shard, uintptr_t address, uint64_t hash) {
  if (!shard.capacity) return nullptr;
  for (size_t i = home_slot(shard, hash);; i = (i + 1) & (shard.capacity - 1)) {
    Block& b = shard.slots[i];
    if (b.address == address) return &b;
    if (!b.address) return nullptr;
  }
}

// Backward-shift deletion: pull later members of the probe run into the hole.
void erase_slot(Shard& shard, Block* victim) {
  size_t mask = shard.capacity - 1;
  size_t hole = static_cast<size_t>(victim - shard.slots);
  for (size_t i = (hole + 1) & mask;; i = (i + 1) & mask) {
    Block& b = shard.slots[i];
    if (!b.address) break;
    size_t home = mix(b.address) & mask;
    // b may move into the hole if its home is not in (hole, i] (cyclically).
    bool home_between = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
    if (!home_between) {
      shard.slots[hole] = b;
      hole = i;
    }
  }
  shard.slots[hole].address = 0;
  --shard.used;
}

void note_live_change(int delta) {
  uint64_t live = g_live.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed) + delta;
  if (delta > 0) {
    uint64_t peak = g_peak.load(std::memory_order_relaxed);
    while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
  }
}

}  // namespace

bool registry_insert(const Block& block, Block* replaced) {
  uint64_t hash = mix(block.address);
  Shard& shard = shard_for(hash);
  {
    LockGuard guard(shard.lock);
    if ((shard.used + 1) * 10 > shard.capacity * 7 && !grow(shard)) return false;
    size_t i = home_slot(shard, hash);
    while (shard.slots[i].address && shard.slots[i].address != block.address)
      i = (i + 1) & (shard.capacity - 1);
    if (shard.slots[i].address) {
      *replaced = shard.slots[i];
      shard.slots[i] = block;
      return true;
    }
    shard.slots[i] = block;
    ++shard.used;
  }
  note_live_change(+1);
  return false;
}

bool registry_remove(uintptr_t address, Block* out) {
  uint64_t hash = mix(address);
  Shard& shard = shard_for(hash);
  {
    LockGuard guard(shard.lock);
    Block* b = find(shard, address, hash);
    if (!b) return false;
    *out = *b;
    erase_slot(shard, b);
  }
  note_live_change(-1);
  return true;
}

bool registry_lookup(uintptr_t address, Block* out) {
  uint64_t hash = mix(address);
  Shard& shard = shard_for(hash);
  LockGuard guard(shard.lock);
  Block* b = find(shard, address, hash);
  if (!b) return false;
  *out = *b;
  return true;
}

bool registry_set_type(uintptr_t address, uintptr_t type_tag, bool only_if_untyped, Block* out) {
  uint64_t hash = mix(address);
  Shard& shard = shard_for(hash);
  LockGuard guard(shard.lock);
  Block* b = find(shard, address, hash);
  if (!b || (only_if_untyped && b->type_tag)) return false;
  b->type_tag = type_tag;
  *out = *b;
  return true;
}

void registry_for_each(void (*visit)(const Block&, void*), void* context) {
  registry_lock_all();
  for (Shard& shard : g_shards)
    for (size_t i = 0; i < shard.capacity; ++i)
      if (shard.slots[i].address) visit(shard.slots[i], context);
  registry_unlock_all();
}

uint64_t registry_live_blocks() { return g_live.load(std::memory_order_relaxed); }
uint64_t registry_peak_live_blocks() { return g_peak.load(std::memory_order_relaxed); }

void registry_lock_all() {
  for (Shard& shard : g_shards) shard.lock.lock();
}

void registry_unlock_all() {
  for (Shard& shard : g_shards) shard.lock.unlock();
}

void registry_clear_in_child() {
  for (Shard& shard : g_shards) {
    if (shard.capacity) std::memset(shard.slots, 0, shard.capacity * sizeof(Block));
    shard.used = 0;
  }
  g_live.store(0);
  g_peak.store(0);
}

}  // namespace runtime
}  // namespace heaptype
