// tracker.hpp: what happens on each allocation, free and type report.
#ifndef HEAPTYPE_RUNTIME_TRACKER_HPP
#define HEAPTYPE_RUNTIME_TRACKER_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "../format/profile_format.hpp"
#include "block_header.hpp"

namespace heaptype {
namespace runtime {

enum State : int {
  kUninitialized = 0,
  kStarting = 1,   // one thread is opening the profile
  kActive = 2,     // blocks get headers from now on, for the rest of the process
  kDisabled = 3,   // HEAPTYPE_DISABLE=1, or the profile could not be created
};

extern std::atomic<int> g_state;
extern std::atomic<bool> g_recording;  // start()/stop(): new allocations are recorded

// Brings the runtime up on first use, whenever that is (static initialisation
// included); returns the resulting state.
int ensure_initialized();
// True once the profile has been finished at exit: later events go out at once.
extern bool g_finished;
inline bool finished() { return __builtin_expect(g_finished, 0); }
// While the C++ runtime's once-per-process buffers are freed at exit (finish): their
// frees are recorded, their memory is not handed back to glibc. The process ends, and a
// 72 KiB free makes glibc consolidate every small free chunk first (~0.05 ms).
extern bool g_keep_released_memory;
// False in a vfork() child, which shares the parent's runtime state.
bool owns_this_process();
// Writes the END chunk. `process_ends`: at exit or exec (not a detach); `cause`: which.
void finish(bool process_ends = true, format::EndCause cause = format::EndCause::kExit);
// Before an exec replaces this process's image (exec_hooks.cpp): the profile is
// finished as at exit, unless the profile is not this process's (a vfork() child) or
// the process has nothing in it yet (a forked child that execs at once leaves none).
void finish_before_exec();
// A signal handler's call into exec or _exit while its thread was inside the runtime.
bool interrupted_the_runtime();
bool dump(const char* path);

inline bool runtime_active() {
  int state = g_state.load(std::memory_order_acquire);
  if (__builtin_expect(state == kActive, 1)) return true;
  if (!sanitizer_ready()) return false;  // sanitizer builds: not before the sanitizer is up
  return state == kUninitialized || state == kStarting ? ensure_initialized() == kActive : false;
}

// The hooks' ordinary case, one load instead of one per condition on every allocation
// and free: the runtime active and recording, the ticker running, full events without
// addresses, the profile not finished, released memory handed back. Each function that
// changes one of these calls refresh_ordinary() after the change.
extern std::atomic<bool> g_ordinary;
inline bool ordinary() { return g_ordinary.load(std::memory_order_acquire); }
void refresh_ordinary();

// Whether blocks may carry headers: only once the runtime is active (never before,
// never when it is disabled), and then until the process ends.
inline bool headers_on() { return g_state.load(std::memory_order_acquire) == kActive; }

// glibc's malloc_usable_size (ours reports the program's share of a block).
size_t libc_usable_size(void* p);

// The slow paths of hot_path.hpp's on_new_block and on_free_block.
//
// A block was allocated for the program at `p`, with room for its header before
// it (offset_code: see block_header.hpp). Writes the header and records the
// allocation. `frame`: the frame address of the allocation function the program
// called (its return address is `call_site`).
// `family`: the function family that allocated it (block_header.hpp).
void on_block(void* p, size_t size, unsigned offset_code, unsigned family, uintptr_t call_site, uintptr_t frame);
// As on_block, for a type-aware operator new of any alignment: the block holds
// `count` objects of `type_tag`.
void on_typed_aligned_block(void* p, size_t size, unsigned offset_code, unsigned family, uintptr_t type_tag,
                            uint64_t count, uintptr_t call_site, uintptr_t frame);
// The program released the block at `p` (header `h`, nullptr when it is not ours)
// wrongly: a FINDING record of `kind` with operands a and b, at the release's call
// site. The release itself goes on as usual afterwards.
void on_finding(const void* p, const BlockHeader* h, unsigned kind, uint64_t a, uint64_t b, uintptr_t call_site,
                uintptr_t frame);
struct ThreadState;
// The owner word and records of a block whose (call site, context, size) the
// memo does not know.
uint64_t record_new_call_site(ThreadState* t, uintptr_t p, size_t size, uintptr_t call_site, uint32_t node,
                              uintptr_t frame);
// The program frees the sealed block at `p`. Records the free; false when the
// memory must stay allocated for now (another thread's block on probation: its
// owner releases it). `frame`: the releasing hook's frame address (0: not known).
bool on_release(void* p, BlockHeader* header, uintptr_t frame);
// glibc moved (or resized) the block at `old` to `p` for realloc, header and all
// (`saved`): the old block's free, then the new block.
void on_reallocated(void* old, void* p, const BlockHeader& saved, size_t size, uintptr_t call_site,
                    uintptr_t frame);
// The same, when the new block could not be one of ours: only the old block's free.
void on_reallocated_away(void* old, const BlockHeader& saved);
// A free (or realloc) of memory the runtime did not allocate.
void on_foreign_release(void* p);

// From the new-expression macro: `p` is what the expression returned, possibly
// past an array cookie. The inline check in new.hpp calls it only when operator
// new could not name the type itself.
void on_tag_new(const void* p, uintptr_t type_tag, size_t elem_size, size_t elem_align);
// From the typed std::allocator: the block `p` allocate() just got holds `count`.
void on_tag_allocation(const void* p, uintptr_t type_tag, size_t elem_size, size_t count);
// From heaptype::tag<T>(p, n): names the block at p; tracks it if untracked.
void on_tag_block(const void* p, uintptr_t type_tag, size_t elem_size, size_t count, uintptr_t call_site,
                  uintptr_t frame);
void on_untag(const void* p);
// The tracked block starting at `p`, if it is longer than `longer_than` bytes, holds
// `count` objects of `type_tag` from now on (a MOVE, as heaptype::tag does). Memory
// that is not such a block of ours (exactly: block_starts.hpp) is left alone.
void on_retype_block(const void* p, uint64_t longer_than, uintptr_t type_tag, size_t elem_size, uint64_t count);

// A block on probation of the calling thread leaves it untyped (realloc: no type is
// coming). Another thread's block stays on probation.
void end_own_probation(void* p, BlockHeader* header);

// The thread exits: its blocks on probation leave it.
void end_all_probation(ThreadState* t);

// Records what signal handlers did while the thread was inside the runtime (the
// thread's pending events); the thread is not busy.
void drain_pending(ThreadState* t);

}  // namespace runtime
}  // namespace heaptype

#endif
