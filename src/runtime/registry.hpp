// registry.hpp: every live block HeapType tracks, keyed by its address.
//
// 64 shards, each a linear-probing hash table under its own spin lock, so threads
// allocating at different addresses rarely meet. Tables live in mmap'd pages and
// double when 70% full; deletion shifts entries back instead of leaving tombstones,
// so churn never degrades lookups. Hashing keeps neighbours together: a 64 KiB
// region of the heap maps to one shard and to one run of slots there, so blocks
// allocated one after another share cache lines in the table as in the heap.
#ifndef HEAPTYPE_RUNTIME_REGISTRY_HPP
#define HEAPTYPE_RUNTIME_REGISTRY_HPP

#include <cstddef>
#include <cstdint>

namespace heaptype {
namespace runtime {

// 32 bytes a live block. The call site, object count and time of a block are in
// its allocation record in the profile, which `owner` names; the registry keeps
// what the runtime itself needs: the identity for the free record, the size, and
// whether the block has a type yet (the first type reported wins).
struct Block {
  uintptr_t address;    // 0 marks an empty slot
  uint64_t size;
  uint64_t owner;       // thread << 40 | allocation number within that thread
  uintptr_t type_tag;   // 0 until a new-expression or tag<T>() names the type
};
static_assert(sizeof(Block) == 32, "two registry entries per cache line");

constexpr unsigned kOwnerNumberBits = 40;
inline uint64_t make_owner(uint32_t thread, uint64_t number) {
  return (static_cast<uint64_t>(thread) << kOwnerNumberBits) | number;
}
inline uint32_t owner_thread(uint64_t owner) { return static_cast<uint32_t>(owner >> kOwnerNumberBits); }
inline uint64_t owner_number(uint64_t owner) { return owner & ((uint64_t{1} << kOwnerNumberBits) - 1); }

// Inserts a block. If its address was still registered (the program released that
// block behind operator delete's back, e.g. with free()), the stale entry is
// replaced and copied to `*replaced`, and true is returned.
bool registry_insert(const Block& block, Block* replaced);

// Removes the block at `address` and copies it out; false if it was never tracked.
bool registry_remove(uintptr_t address, Block* out);

// Copies out the block at `address`; false if it is not tracked.
bool registry_lookup(uintptr_t address, Block* out);

// Sets the type of the block at `address` if it is tracked; `only_if_untyped`
// keeps the first type a block received. Copies the block out on success.
bool registry_set_type(uintptr_t address, uintptr_t type_tag, bool only_if_untyped, Block* out);

// Visits every live block with all shards locked (finish, dump).
void registry_for_each(void (*visit)(const Block&, void*), void* context);

uint64_t registry_live_blocks();
uint64_t registry_peak_live_blocks();

// Fork support: hold every shard across fork; the child then forgets the parent's
// blocks (their frees in the child are untracked, as the child's profile is new).
void registry_lock_all();
void registry_unlock_all();
void registry_clear_in_child();

}  // namespace runtime
}  // namespace heaptype

#endif
