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

// What a site number of this thread stands for: a site of its own, or another
// thread's site with a new type (DERIVED_SITE; `base` is that owner word + 1).
struct SiteKey {
  format::Site site;
  uint64_t base;
};

struct SiteSlot {
  SiteKey key;
  uint32_t id;
  uint32_t used;
};

struct SiteTable {
  SiteSlot* slots;     // open addressing, keyed by SiteKey
  size_t capacity;
  size_t used;
  SiteKey* by_id;      // the definitions in site-number order
  size_t by_id_capacity;
};

struct PendingAlloc {
  uintptr_t address;
  uint64_t size;
  uintptr_t call_site;
  uintptr_t type_tag;
  uint64_t count;
  uint64_t time_us;
  uint32_t node;             // calling-context node
  uint32_t site;             // the untyped site its owner word names until it is committed
  bool valid;
};

// The thread's last ALLOC record: a FREE_LAST may name it while it stays open.
struct LastAlloc {
  uintptr_t address;
  uint32_t site;
  bool open;
};

constexpr size_t kEventBufferSize = 64 * 1024;
using format::kMaxRecordSize;

struct ThreadState {
  SpinLock lock;
  uint32_t number;           // 1, 2, ... in order of first allocation
  bool exited;
  bool announced;            // its THREAD chunk is in the file
  uint8_t* buffer;
  size_t used;
  uintptr_t last_address;    // of the last ALLOC record (address mode: deltas from it)
  uint64_t last_time_us;
  SiteTable sites;
  PendingAlloc pending;
  LastAlloc last_alloc;
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

// This thread's number for a site, writing its SITE record on first use; and
// for another thread's site with a new type (a DERIVED_SITE record).
uint32_t site_number(ThreadState* t, const format::Site& site);
uint32_t derived_site_number(ThreadState* t, uint32_t thread, uint32_t site, uintptr_t type_tag, uint64_t count);
// The definition of one of this thread's site numbers (nullptr if undefined).
const SiteKey* site_definition(const ThreadState* t, uint32_t site);
// Writes the pending allocation's ALLOC record (its owner word names its site).
void commit_pending(ThreadState* t);
// A tracked block is freed: FREE, FREE_LAST or FREE_REMOTE, from its owner word.
void emit_free(ThreadState* t, uint64_t owner, uintptr_t address, uint64_t time_us);
// The block `owner` names is counted at this thread's `new_site` from now on.
void emit_move(ThreadState* t, uint64_t owner, uint32_t new_site, uintptr_t address, uint64_t time_us);
// A new calling-context node of this thread (see call_context.hpp).
void emit_node(ThreadState* t, uint32_t parent, uintptr_t function, uintptr_t call_site);
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
