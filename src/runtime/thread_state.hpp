// thread_state.hpp: what each thread keeps, and the encoder of its event stream.
//
// Every thread owns a 64 KiB event buffer, a table of the sites it has used, and
// one pending allocation: the block operator new just returned, held back until
// the new-expression around it reports the type (usually the very next thing the
// thread does), so that a typed allocation costs one record, not two.
//
// The owner takes its state's lock for each event. It is uncontended except when
// the finisher, dump() or the periodic flush collects the buffer, which lets them
// do so safely while the thread runs on.
#ifndef HEAPTYPE_RUNTIME_THREAD_STATE_HPP
#define HEAPTYPE_RUNTIME_THREAD_STATE_HPP

#include <cstddef>
#include <cstdint>

#include "../format/profile_format.hpp"
#include "call_context.hpp"
#include "spinlock.hpp"

namespace heaptype {
namespace runtime {

struct SiteSlot {
  format::Site site;
  uint32_t id;
  uint32_t used;
};

struct SiteTable {
  SiteSlot* slots;
  size_t capacity;
  size_t used;
};

struct PendingAlloc {
  uintptr_t address;
  uint64_t size;
  uintptr_t call_site;
  uintptr_t type_tag;
  uint64_t count;
  uint64_t time_us;
  uint32_t node;             // calling-context node
  bool valid;
};

constexpr size_t kEventBufferSize = 64 * 1024;
constexpr size_t kMaxRecordSize = 64;  // the largest record (a SITE) fits with room

struct ThreadState {
  SpinLock lock;
  uint32_t number;           // 1, 2, ... in order of first allocation
  bool exited;
  bool announced;            // its THREAD chunk is in the file
  uint8_t* buffer;
  size_t used;
  uint64_t next_alloc_number;
  uintptr_t last_address;
  uint64_t last_time_us;
  SiteTable sites;
  PendingAlloc pending;
  CallContext context;
  uint64_t allocations;
  uint64_t frees;
  uint64_t untracked_frees;
  ThreadState* next;         // all states, for the finisher
  ThreadState* next_free;    // exited states, for reuse by new threads
};

extern __thread ThreadState* tls_thread_state __attribute__((tls_model("initial-exec")));

ThreadState* create_thread_state();

// The calling thread's state, created on first use; nullptr if out of memory.
inline ThreadState* this_thread_state() {
  ThreadState* t = tls_thread_state;
  return __builtin_expect(t != nullptr, 1) ? t : create_thread_state();
}
// The calling thread's state if it has one already.
inline ThreadState* this_thread_state_if_any() { return tls_thread_state; }

// Runs `visit` on every state with its lock held.
void for_each_thread_state(void (*visit)(ThreadState*, void*), void* context);

// Encoder: all of these require the state's lock.
void commit_pending(ThreadState* t);
void emit_free(ThreadState* t, uint32_t thread, uint64_t number, uint64_t time_us);
// A type for a block that was committed untyped (see ControlOp::kRetype).
void emit_retype(ThreadState* t, uint32_t thread, uint64_t number, uintptr_t type_tag, uint64_t elem_size,
                 uint64_t offset, uint64_t cookie_word, uint64_t time_us);
// A new calling-context node of this thread (see call_context.hpp).
void emit_node(ThreadState* t, uint32_t parent, uintptr_t function, uintptr_t call_site);
// heaptype::tag<T>(p, n) on a tracked block: its type from now on.
void emit_name(ThreadState* t, uint32_t thread, uint64_t number, uintptr_t type_tag, uint64_t count,
               uint64_t time_us);
// Appends the buffered records as one chunk to the profile.
void flush_events(ThreadState* t);

// Creates the key whose destructor flushes a thread's state when it exits.
void thread_states_init();
// Fork: hold every state across fork(); the child keeps only its own, renumbered
// as thread 1 of a fresh profile.
void thread_states_lock_all();
void thread_states_unlock_all();
void thread_states_reset_in_child();

}  // namespace runtime
}  // namespace heaptype

#endif
