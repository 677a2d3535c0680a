// thread_state.hpp: what each thread keeps, and the encoder of its event stream.
//
// Every thread owns a 64 KiB event buffer, a table of the sites it has used, the
// types it learned at its allocation call sites, its calling-context tree and a few
// blocks on probation. Only the thread itself writes any of it: no lock and no
// atomic read-modify-write on the path of an allocation or a free.
//
// Collecting a running thread's buffer (periodic flush, dump(), the finisher) is
// safe without stopping it. The owner appends whole records after `committed` and
// publishes the new end with a release store once an event's records are complete;
// a collector takes the state's flush lock and writes out [flushed, committed),
// bytes the owner no longer touches. The owner takes the same lock only when its
// buffer is full (once per 64 KiB) to write out the rest and start again at 0, so
// both sides move `flushed` and reset the buffer under the lock, and the bytes the
// owner is writing are never the bytes a collector reads.
#ifndef HEAPTYPE_RUNTIME_THREAD_STATE_HPP
#define HEAPTYPE_RUNTIME_THREAD_STATE_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "../format/profile_format.hpp"
#include "aggregate.hpp"
#include "block_header.hpp"
#include "call_context.hpp"
#include "call_site_types.hpp"
#include "clock.hpp"
#include "spinlock.hpp"
#include "tracker.hpp"

namespace heaptype {
namespace runtime {

// What a site number of this thread stands for: a site of its own, or another
// thread's site with a new type (DERIVED_SITE; `base` is that owner word + 1).
struct SiteKey {
  format::Site site;
  uint64_t base;
};

// A slot of the site index: the site's number + 1 (0: empty) and the high half of
// its key's hash, so that a probe compares 8 bytes and reads the definition only on
// a likely match. Real programs have a site per call path and size: a test suite's
// binary makes one for every second allocation, and a slot that held the key itself
// cost 56 bytes a slot, all of them present.
struct SiteSlot {
  uint32_t id_plus_one;
  uint32_t hash_high;
};

// The sites a thread keeps to find them again: up to this many, then it forgets
// them and numbers on (a new generation, as for calling-context nodes, see
// call_context.hpp). A site met again is defined again under a new number; blocks of
// a forgotten site keep their number, and a retyping derives its new site from it.
constexpr size_t kSitesPerGeneration = size_t{1} << 14;

struct SiteTable {
  SiteSlot* slots;     // open addressing, keyed by SiteKey (through by_id)
  size_t capacity;
  size_t used;         // definitions kept: site numbers first_site ... first_site + used - 1
  uint32_t first_site;
  SiteKey* by_id;      // the kept definitions in site-number order
  size_t by_id_capacity;
};

// The thread's last ALLOC record: a FREE_LAST may name it while it stays open
// (address 0: closed).
struct LastAlloc {
  uintptr_t address;
  uint32_t site;
};

// A block whose type may still arrive from its new-expression (the first block of
// a call site, or of a site that has seen several types): another thread's free
// of it only marks it, and this thread releases it (see tracker.cpp).
struct ProbationBlock {
  uintptr_t address;
  uintptr_t call_site;
  uintptr_t frame;  // the allocating hook's frame address (see record_free)
  uint32_t node;
  uint32_t site;
};
constexpr uint32_t kProbationSlots = 16;

// A block typed by a report that may not be its new-expression's: at a probation
// block's start, one that did not fill it (a constructor's placement new of a first
// member, or an array's own new-expression); at the start of a block its call site
// typed, one of another type before any new-expression agreed with the call site
// (tracker.cpp, "Reports that may not be the new-expression's").
struct InexactReport {
  uintptr_t address;
  uintptr_t call_site;
  uint64_t owner;      // the owner word the report gave the block
  uintptr_t type_tag;
  uint64_t elem_size;
  uintptr_t predicted; // the call site's type the report contests; 0: a probation block's report
};
constexpr uint32_t kInexactSlots = 4;

// What a signal handler did while its thread was inside the runtime (`busy`): the
// thread's records are half written then, so the handler only notes the event here
// and the thread records it when it leaves the runtime (drain_pending, tracker.cpp).
enum class PendingKind : uint8_t { kAlloc, kFree, kType };
struct PendingEvent {
  PendingKind kind;
  uint8_t offset_code;     // kAlloc, kFree: the block's header offset code
  bool tracked;            // kFree: the block was tracked
  uintptr_t address;       // the block (kType: the object the new-expression returned)
  uint64_t size;           // kAlloc: its size; kType: the element size
  uint64_t owner;          // kFree: its owner word
  uintptr_t call_site;     // kAlloc
  uintptr_t type_tag;      // kType
  uint64_t elem_align;     // kType
  uint64_t count;          // kType: the objects an allocator reported at the block's end (0: those that fit)
};
constexpr uint32_t kPendingSlots = 32;

// The thread's stack, for walking frame pointers without leaving it: every address in
// [low, high) is mapped while the thread runs. A frame outside is on a stack the program
// made itself (a coroutine's, a fiber's, a signal stack), whose bounds nobody tells.
struct StackBounds {
  uintptr_t high;      // frames lie below; 0: unknown (no walking)
  uintptr_t low;       // known once `low_known` (find_stack_low); high when nothing is known
  uintptr_t walk_low;  // low once known, else UINTPTR_MAX: a walk's one test sends it to learn it
  bool low_known;
};

constexpr size_t kEventBufferSize = 64 * 1024;
using format::kMaxRecordSize;

struct ThreadState {
  // --- the owner's, on every event
  bool busy;                 // inside the runtime: a nested call (signal handler) is recorded later
  bool own_call;             // the runtime calls into libc that allocates (starting the ticker): not the program's
  uint32_t number;           // 1, 2, ... in order of first allocation
  uint64_t owner_base;       // make_owner(number, 0, false): owner words of its blocks
  uint64_t os_tid;
  uint8_t* buffer;
  size_t used;               // the owner's write position
  uint64_t last_time;        // of the last TIME record, in clock ticks
  uintptr_t last_address;    // of the last ALLOC record (address mode: deltas from it)
  LastAlloc last_alloc;
  uint32_t newest_site;      // the site and node the stream defined last (version 3's
  uint32_t newest_node;      // distances count from them)
  format::StreamDeltas deltas;
  uintptr_t hint_block;      // the block heaptype_hint describes (0: none)
  SiteTable sites;
  CallSiteTypes call_sites;
  CallContext context;
  StackBounds stack;
  // The deepest frame seen in the current clock tick (allocations, and function
  // entries in instrument mode), and the depth last written (STACK records).
  uintptr_t stack_deepest;
  uint64_t stack_reported;
  ProbationBlock probation[kProbationSlots];
  uint32_t probation_count;
  InexactReport inexact[kInexactSlots];
  uint32_t inexact_count;
  // Signal handlers' events, recorded when the runtime is left (__atomic builtins:
  // the handler appends, the thread drains).
  PendingEvent pending[kPendingSlots];
  uint32_t pending_count;
  // Counters for the END chunk: written by the owner only (relaxed), read by the finisher.
  std::atomic<uint64_t> allocations;
  std::atomic<uint64_t> frees;
  std::atomic<uint64_t> untracked_frees;
  // Header bytes beyond 16 per tracked block: those of untracked blocks and the
  // padding of over-aligned ones, allocated minus freed by this thread.
  std::atomic<int64_t> other_header_bytes;
  // Aggregated mode: inside a count of its own without the lock (aggregate.cpp).
  std::atomic<bool> counting;

  // --- shared with collectors (see above)
  std::atomic<size_t> committed;
  SpinLock flush_lock;
  size_t flushed;            // under flush_lock
  // A full buffer handed to the ticker thread, which writes (and compresses) it, while
  // the owner goes on in its spare: the allocating thread does not wait for the file.
  // Under flush_lock; written before anything else of the thread is.
  uint8_t* handed;           // nullptr: none
  size_t handed_from, handed_to;
  uint8_t* spare;            // an empty buffer for the next hand-over (made on the first)
  bool announced;            // its THREAD chunk is in the file (under flush_lock)
  bool exited;
  ThreadState* next;         // all states, for the finisher
  ThreadState* next_free;    // exited states, for reuse by new threads
};

extern __thread ThreadState* tls_thread_state __attribute__((tls_model("initial-exec")));

ThreadState* create_thread_state();

// Learns the stack's low end (a call to the kernel, made at the thread's first walk).
void find_stack_low(ThreadState* t);

// The calling thread's state, created on first use; nullptr if out of memory.
inline ThreadState* this_thread_state() {
  ThreadState* t = tls_thread_state;
  return __builtin_expect(t != nullptr, 1) ? t : create_thread_state();
}

// Starts the waiting ticker when the run is old enough (or a snapshot was asked for).
// Only from an operator new of the program, outside the runtime (`busy` clear):
// glibc calls malloc and free while it holds locks that pthread_create takes (a
// thread's stacks are freed under the stack cache's lock: a ticker started from that
// free waited for that lock forever), never operator new.
void start_ticker_if_due(ThreadState* t);

// Relaxed counters only the owner writes: a plain add, no read-modify-write.
template <class T, class U>
inline void bump(std::atomic<T>& counter, U by) {
  counter.store(counter.load(std::memory_order_relaxed) + static_cast<T>(by), std::memory_order_relaxed);
}

// Runs `visit` on every state (exited ones too) with its flush lock held.
void for_each_thread_state(void (*visit)(ThreadState*, void*), void* context);

// --- encoder: the owner only, with `busy` set ----------------------------------------

extern bool g_write_addresses;  // the profile's records carry addresses (profile_writer.cpp)

// This thread's number for a site, writing its SITE record on first use; and
// for another thread's site with a new type (a DERIVED_SITE record).
uint32_t site_number(ThreadState* t, const format::Site& site);
uint32_t derived_site_number(ThreadState* t, uint32_t thread, uint32_t site, uintptr_t type_tag, uint64_t count);
// The definition of one of this thread's site numbers (nullptr if undefined, or
// of a forgotten generation).
const SiteKey* site_definition(const ThreadState* t, uint32_t site);
// A FREE_REMOTE record: a block of another thread's site.
void emit_remote_free(ThreadState* t, uint64_t owner, uintptr_t address, uint64_t time);
// The block `owner` names is counted at this thread's `new_site` from now on.
void emit_move(ThreadState* t, uint64_t owner, uint32_t new_site, uintptr_t address, uint64_t time);
// A new calling-context node of this thread (see call_context.hpp), numbered `id`:
// the one after the last.
void emit_node(ThreadState* t, uint32_t id, uint32_t parent, uintptr_t function, uintptr_t call_site);
// The buffer is full: its records go to the ticker thread (see `handed`), or to the
// file now when the ticker has not written the last full buffer yet, or the profile
// is finished.
void flush_own(ThreadState* t);
// The thread's records go to the file now (it exits).
void flush_own_now(ThreadState* t);
// The ticker's side of flush_own: writes out the full buffers threads handed over.
void write_handed_buffers();
// A TIME record: the thread's clock moves on to `time`.
void emit_time_record(ThreadState* t, uint64_t time);
// A STACK record of the tick that ends, if the depth changed (the owner only).
void report_stack_depth(ThreadState* t);
// The same for the thread's last tick, when the profile is finished, committed so that
// the final flush writes it (the owner only; nothing when it is inside the runtime).
void report_last_stack_depth(ThreadState* t);

// Room for one record (and a TIME record before it).
inline void reserve_record(ThreadState* t) {
  if (__builtin_expect(t->used + kMaxRecordSize > kEventBufferSize, 0)) flush_own(t);
}

inline void put_record_varint(ThreadState* t, uint64_t v) {
  t->used = static_cast<size_t>(format::put_varint(t->buffer + t->used, v) - t->buffer);
}

// Records are stamped `time` (clock ticks; a thread's time never goes back).
inline void stamp(ThreadState* t, uint64_t time) {
  if (__builtin_expect(time > t->last_time, 0)) emit_time_record(t, time);
}

// Address mode: the block's address after ALLOC, FREE, FREE_REMOTE and MOVE.
// kOrdinary (here and below): the caller saw ordinary() (tracker.hpp): full events
// without addresses, not finished.
template <bool kOrdinary = false>
inline void put_address(ThreadState* t, uintptr_t address) {
  if (!kOrdinary && __builtin_expect(g_write_addresses, 0))
    put_record_varint(t, format::encode_address_delta(address, t->last_address));
}

// How deep the stack goes: frames lie below the top, the deepest at the lowest address.
// A frame below the stack's known low end is on another stack (a coroutine's): not
// this one's depth.
__attribute__((always_inline)) inline void note_stack_depth(ThreadState* t, uintptr_t frame) {
  if (frame < t->stack_deepest && frame >= t->stack.low) t->stack_deepest = frame;
}

template <bool kOrdinary = false>
__attribute__((always_inline)) inline void emit_alloc(ThreadState* t, uint32_t site, uintptr_t address,
                                                     uint64_t time) {
  if (!kOrdinary && aggregating()) return aggregate_alloc(t, site);
  reserve_record(t);
  stamp(t, time);  // first: the depth of this allocation belongs to its own tick
  note_stack_depth(t, reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
  put_record_varint(t, format::alloc_record_head(format::site_distance(t->newest_site, site)));
  put_address<kOrdinary>(t, address);
  t->last_address = address;
  t->last_alloc = {address, site};
  bump(t->allocations, 1);
}

// A free of one of this thread's own blocks: FREE_LAST when it is the block the
// last ALLOC record named and nothing was allocated since, FREE otherwise.
template <bool kOrdinary = false>
__attribute__((always_inline)) inline void emit_local_free(ThreadState* t, uint32_t site, uintptr_t address,
                                                          uint64_t time) {
  if (!kOrdinary && aggregating()) return aggregate_free(t, t->number, site);
  reserve_record(t);
  stamp(t, time);
  LastAlloc& last = t->last_alloc;
  if (last.address == address && last.site == site) {
    put_record_varint(t, format::control_record_head(format::ControlOp::kFreeLast));
    last.address = 0;
  } else {
    put_record_varint(t, format::free_record_head(format::site_distance(t->newest_site, site)));
    put_address<kOrdinary>(t, address);
  }
  bump(t->frees, 1);
}

// FREE, FREE_LAST or FREE_REMOTE, from the block's owner word.
inline void emit_free(ThreadState* t, uint64_t owner, uintptr_t address, uint64_t time) {
  if (owner_thread(owner) == t->number)
    emit_local_free(t, owner_site(owner), address, time);
  else
    emit_remote_free(t, owner, address, time);
}

// A FINDING record (see format::ControlOp::kFinding): `thread`, `site` name the block
// (0, 0: one the profile does not hold).
inline void emit_finding(ThreadState* t, format::FindingKind kind, uint32_t thread, uint32_t site, uint64_t a,
                         uint64_t b, uintptr_t call_site, uint32_t node, uint64_t time) {
  if (t->used + format::kMaxFindingRecordSize + kMaxRecordSize > kEventBufferSize) flush_own(t);
  stamp(t, time);
  put_record_varint(t, format::control_record_head(format::ControlOp::kFinding));
  for (uint64_t v : {uint64_t{static_cast<uint8_t>(kind)}, uint64_t{thread}, uint64_t{site}, a, b,
                     uint64_t{call_site}, uint64_t{node}})
    put_record_varint(t, v);
}

// The event's records are complete: collectors may take them (and, once the
// profile is finished, they go to the file at once).
template <bool kOrdinary = false>
inline void end_event(ThreadState* t) {
  t->committed.store(t->used, std::memory_order_release);
  if (!kOrdinary && __builtin_expect(g_finished, 0)) flush_own(t);
}

// Collector side: writes out what the owner has committed.
void collect_events(ThreadState* t);

// Creates the key whose destructor flushes a thread's state when it exits.
void thread_states_init(void (*on_exit)(ThreadState*));
// Fork: hold every state across fork(); the child keeps only its own, renumbered
// as thread 1 of a fresh profile.
void thread_states_lock_all();
void thread_states_unlock_all();
void thread_states_reset_in_child();

}  // namespace runtime
}  // namespace heaptype

#endif
