// external_blocks.hpp: memory the program named with heaptype::tag<T>(p, n) that
// the runtime did not allocate (static storage, a pool, __libc_malloc), tracked
// until heaptype::untag(p) (or free(p)). It has no header, so a small table keyed
// by address holds its owner word. Rare: a lock guards it.
#ifndef HEAPTYPE_RUNTIME_EXTERNAL_BLOCKS_HPP
#define HEAPTYPE_RUNTIME_EXTERNAL_BLOCKS_HPP

#include <atomic>
#include <cstdint>

namespace heaptype {
namespace runtime {

extern std::atomic<uint32_t> g_external_count;

// Tracks `address` with `owner`; false if the table is full (untracked).
bool external_insert(uintptr_t address, uint64_t owner);
// Forgets `address`: its owner word, or 0 if it was not tracked.
uint64_t external_remove(uintptr_t address);
// The owner word of `address`, or 0.
uint64_t external_lookup(uintptr_t address);
// Re-names an external block (its type arrived again).
void external_update(uintptr_t address, uint64_t owner);
// Memory the table takes while it holds anything.
uint64_t external_table_bytes();
// A forked child's profile starts empty.
void external_clear_in_child();

}  // namespace runtime
}  // namespace heaptype

#endif
