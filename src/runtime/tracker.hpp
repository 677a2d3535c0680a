// tracker.hpp: what happens on each allocation, free and type report.
#ifndef HEAPTYPE_RUNTIME_TRACKER_HPP
#define HEAPTYPE_RUNTIME_TRACKER_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace heaptype {
namespace runtime {

enum State : int {
  kUninitialized = 0,
  kStarting = 1,   // one thread is opening the profile
  kActive = 2,
  kDisabled = 3,   // HEAPTYPE_DISABLE=1, or the profile could not be created
};

extern std::atomic<int> g_state;
extern std::atomic<bool> g_recording;  // start()/stop(): new allocations are recorded

// Brings the runtime up on first use, whenever that is (static initialisation
// included); returns the resulting state.
int ensure_initialized();
// True once the profile has been finished at exit: later events go out at once.
bool finished();
// False in a vfork() child, which shares the parent's runtime state.
bool owns_this_process();
void finish();
bool dump(const char* path);

inline bool runtime_active() {
  int state = g_state.load(std::memory_order_acquire);
  if (__builtin_expect(state == kActive, 1)) return true;
  return state == kUninitialized || state == kStarting ? ensure_initialized() == kActive : false;
}

// `caller_sp`: the allocating code's stack pointer (calling contexts use it to
// drop frames that a longjmp or an exception left behind).
void on_alloc(void* p, size_t size, uintptr_t call_site, uintptr_t caller_sp);
void on_free(void* p);
// realloc: detach the old block before glibc may hand its address to another
// thread, then record the outcome (a failed realloc re-attaches it).
uint64_t detach_block(void* p);
void on_realloc_done(uint64_t old_owner, void* old, void* p, size_t size, uintptr_t call_site,
                     uintptr_t caller_sp);
// From the new-expression macro and the allocator shim: `p` is what the expression
// (or allocate()) returned, possibly past an array cookie.
void on_tag_new(const void* p, uintptr_t type_tag, size_t elem_size, size_t elem_align);
// From heaptype::tag<T>(p, n): names the block at p; registers it if untracked.
void on_tag_block(const void* p, uintptr_t type_tag, size_t elem_size, size_t count,
                  uintptr_t call_site);
void on_untag(const void* p);

}  // namespace runtime
}  // namespace heaptype

#endif
