// registry.hpp: every live block HeapType tracks, found by its address.
//
// A shadow table: one 8-byte word per 8 bytes of address space, holding the owner
// of the block that starts there (its thread and site), 0 where no
// tracked block starts. The word is found by arithmetic, so insert, remove and
// lookup are a load and a store: no lock, no probing, no hashing. Concurrent
// threads never touch the same word at once, because malloc never hands out one
// address twice while it is live; a program's own hand-over of a pointer to
// another thread orders the accesses as it orders everything else.
//
// The table is reserved in 64 MiB leaves, one per 64 MiB region of the heap,
// mapped lazily with MAP_NORESERVE: only pages that hold owners of live or past
// blocks cost memory, at most as many bytes as the heap spans.
//
// The size, type, call site, count and time of a block are in its allocation
// record in the profile, which the owner names.
#ifndef HEAPTYPE_RUNTIME_REGISTRY_HPP
#define HEAPTYPE_RUNTIME_REGISTRY_HPP

#include <cstddef>
#include <cstdint>

namespace heaptype {
namespace runtime {

// The owner word of a block: the thread that allocated it (or took it over by
// naming its type) and that thread's site number of the block. Never 0: thread
// numbers start at 1.
inline uint64_t make_owner(uint32_t thread, uint32_t site) { return (static_cast<uint64_t>(thread) << 32) | site; }
inline uint32_t owner_thread(uint64_t owner) { return static_cast<uint32_t>(owner >> 32); }
inline uint32_t owner_site(uint64_t owner) { return static_cast<uint32_t>(owner); }

// Reserves the table's directory; false (profiling off) if the kernel refuses.
bool registry_init();

// Records that a block owned by `owner` starts at `address`. Returns the owner
// that was still registered there (a block the program released behind
// operator delete's back, e.g. with free() of a realloc'ed pointer), else 0.
uint64_t registry_insert(uintptr_t address, uint64_t owner);

// Forgets the block at `address`; its owner, or 0 if it was never tracked.
uint64_t registry_remove(uintptr_t address);

// The owner of the block at `address`, or 0.
uint64_t registry_lookup(uintptr_t address);

// Visits every live block (finish, dump): reads only the table's resident pages.
void registry_for_each(void (*visit)(uintptr_t address, uint64_t owner, void* context), void* context);

// Bytes of memory the table occupies now.
uint64_t registry_resident_bytes();

// Fork: the child forgets the parent's blocks (their frees in the child are
// untracked: the child's profile starts empty).
void registry_clear_in_child();

}  // namespace runtime
}  // namespace heaptype

#endif
