#include "external_blocks.hpp"

#include "spinlock.hpp"

namespace heaptype {
namespace runtime {

std::atomic<uint32_t> g_external_count{0};

namespace {

// Linear probing with tombstones; a fixed size in static storage (zero-initialised,
// usable before any constructor runs). Programs tag a handful of pools, not
// thousands of blocks.
constexpr uint32_t kSlots = 4096;
constexpr uintptr_t kTombstone = 1;

struct Slot {
  uintptr_t address;  // 0: never used; kTombstone: removed
  uint64_t owner;
};

SpinLock g_lock;
Slot g_slots[kSlots];
uint32_t g_used;  // live + tombstones

inline uint32_t first_slot(uintptr_t address) {
  return static_cast<uint32_t>((address * 0x9E3779B97F4A7C15ull) >> 52) & (kSlots - 1);
}

Slot* find(uintptr_t address) {
  for (uint32_t i = first_slot(address), n = 0; n < kSlots; i = (i + 1) & (kSlots - 1), ++n) {
    if (g_slots[i].address == address) return &g_slots[i];
    if (!g_slots[i].address) return nullptr;
  }
  return nullptr;
}

}  // namespace

bool external_insert(uintptr_t address, uint64_t owner) {
  LockGuard guard(g_lock);
  if (Slot* s = find(address)) {
    s->owner = owner;
    return true;
  }
  if (g_used + 1 >= kSlots) return false;
  for (uint32_t i = first_slot(address);; i = (i + 1) & (kSlots - 1)) {
    Slot& s = g_slots[i];
    if (s.address > kTombstone) continue;
    if (!s.address) ++g_used;
    s = {address, owner};
    g_external_count.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
}

uint64_t external_remove(uintptr_t address) {
  LockGuard guard(g_lock);
  Slot* s = find(address);
  if (!s) return 0;
  uint64_t owner = s->owner;
  s->address = kTombstone;
  g_external_count.fetch_sub(1, std::memory_order_relaxed);
  return owner;
}

uint64_t external_lookup(uintptr_t address) {
  LockGuard guard(g_lock);
  Slot* s = find(address);
  return s ? s->owner : 0;
}

void external_update(uintptr_t address, uint64_t owner) {
  LockGuard guard(g_lock);
  if (Slot* s = find(address)) s->owner = owner;
}

uint64_t external_table_bytes() {
  return g_external_count.load(std::memory_order_relaxed) ? sizeof g_slots : 0;
}

void external_clear_in_child() {
  for (Slot& s : g_slots) s = {0, 0};
  g_used = 0;
  g_external_count.store(0, std::memory_order_relaxed);
  g_lock.unlock();
}

}  // namespace runtime
}  // namespace heaptype
