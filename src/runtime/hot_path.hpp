// hot_path.hpp: an allocation and a free, as the replaced allocation functions see
// them. The common cases are inline here, in the functions the program calls: a
// block of a call site seen before (the memo names its site and type), a free of
// one of the thread's own blocks. Everything else is in tracker.cpp.
//
// Each comes in two builds: kOrdinary, for a caller that saw ordinary() (tracker.hpp)
// and so skips the checks of recording, the ticker, the aggregated and address modes
// and the finished profile; and the general one, which makes them.
#ifndef HEAPTYPE_RUNTIME_HOT_PATH_HPP
#define HEAPTYPE_RUNTIME_HOT_PATH_HPP

#include "block_header.hpp"
#include "call_context.hpp"
#include "call_site_types.hpp"
#include "clock.hpp"
#include "heaptype/hint.hpp"
#include "thread_state.hpp"
#include "tracker.hpp"

namespace heaptype {
namespace runtime {

inline void set_hint(ThreadState* t, uintptr_t block, uintptr_t object, uintptr_t type_tag) {
  t->hint_block = block;
  heaptype_hint = {reinterpret_cast<const void*>(object), reinterpret_cast<const void*>(type_tag)};
}

inline void clear_hint(ThreadState* t) {
  t->hint_block = 0;
  heaptype_hint.object = nullptr;
}

// Leaving the runtime: a signal handler that ran meanwhile may have left events.
__attribute__((always_inline)) inline void leave_runtime(ThreadState* t) {
  std::atomic_signal_fence(std::memory_order_seq_cst);  // after `busy` is cleared
  if (__builtin_expect(__atomic_load_n(&t->pending_count, __ATOMIC_RELAXED) != 0, 0)) drain_pending(t);
}

// The allocation's records for a call site the memo knows; false when it does not.
template <bool kOrdinary>
__attribute__((always_inline)) inline bool record_known_allocation(ThreadState* t, uintptr_t p, size_t size, uintptr_t call_site, uint32_t node,
                                    uint64_t* owner) {
  const SiteMemo* memo = memo_find(memo_set(t->call_sites, call_site, node, size), call_site, node, size);
  if (__builtin_expect(!memo, 0)) return false;
  if (memo->type_tag)
    set_hint(t, p, p + memo->offset, memo->type_tag);
  else if (t->hint_block)
    clear_hint(t);
  emit_alloc<kOrdinary>(t, memo->site, p, event_tick<kOrdinary>());
  *owner = t->owner_base | memo->site | (memo->type_tag ? kOwnerTyped : 0);
  return true;
}

// A block was allocated for the program at `p`, with room for its header before it
// (offset code 0: the plain 16 bytes), by a function of `family`. Writes the header
// and records it.
template <bool kOrdinary>
__attribute__((always_inline)) inline void on_new_block(void* p, size_t size, unsigned family, uintptr_t call_site,
                                                        uintptr_t frame) {
  ThreadState* t = tls_thread_state;
  if (__builtin_expect(!t || t->busy || (!kOrdinary && !g_recording.load(std::memory_order_relaxed)), 0))
    return on_block(p, size, 0, family, call_site, frame);
  if (!kOrdinary && __builtin_expect(!clock_running(), 0) && family != kFamilyMalloc) start_ticker_if_due(t);
  t->busy = true;
  uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t node = g_contexts_enabled ? allocation_context(t, call_site, frame) : 0;
  uint64_t owner;
  if (!record_known_allocation<kOrdinary>(t, address, size, call_site, node, &owner))
    owner = record_new_call_site(t, address, size, call_site, node, frame);
  t->busy = false;
  write_header(p, size, 0, family, owner);
  end_event<kOrdinary>(t);
}

// A block for a type-aware operator new (heaptype/type_aware_new.hpp): the type and
// the size arrive in the same call, so the site is typed at once, no probation.
// `count`: the objects in it.
template <bool kOrdinary>
__attribute__((always_inline)) inline void on_typed_block(void* p, size_t size, unsigned family, uintptr_t type_tag,
                                                          uint64_t count, uintptr_t call_site, uintptr_t frame) {
  ThreadState* t = tls_thread_state;
  if (__builtin_expect(!t || t->busy || (!kOrdinary && !g_recording.load(std::memory_order_relaxed)), 0))
    return on_typed_aligned_block(p, size, 0, family, type_tag, count, call_site, frame);
  if (!kOrdinary && __builtin_expect(!clock_running(), 0) && family != kFamilyMalloc) start_ticker_if_due(t);
  t->busy = true;
  uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t node = g_contexts_enabled ? allocation_context(t, call_site, frame) : 0;
  SiteMemo* set = memo_set(t->call_sites, call_site, node, size);
  SiteMemo* memo = memo_find(set, call_site, node, size);
  uint32_t site;
  if (__builtin_expect(memo && memo->type_tag == type_tag, 1)) {
    site = memo->site;
  } else {
    site = site_number(t, {size, count, type_tag, call_site, node});
    memo_learn(set, memo, {call_site, size, type_tag, node, site, 0});
  }
  if (t->hint_block) clear_hint(t);
  emit_alloc<kOrdinary>(t, site, address, event_tick<kOrdinary>());
  t->busy = false;
  write_header(p, size, 0, family, make_owner(t->number, site, true));
  end_event<kOrdinary>(t);
  leave_runtime(t);
}

// The program frees the sealed block at `p` (its header's offset code `offset_code`),
// from the hook whose frame address is `frame`. False when the memory must stay
// allocated for now (another thread's block on probation: its owner releases it).
template <bool kOrdinary>
__attribute__((always_inline)) inline bool on_free_block(void* p, BlockHeader* h, unsigned offset_code,
                                                         uintptr_t frame) {
  ThreadState* t = tls_thread_state;
  uint64_t owner = load_owner(h);
  // This thread's, of this process, not on probation, not over-aligned.
  bool own_plain_block = t && !t->busy &&
                         (owner & (kOwnerThreadAndEpoch | kOwnerProbation | kOwnerFreed)) == t->owner_base &&
                         offset_code == 0;
  if (__builtin_expect(!own_plain_block, 0)) return on_release(p, h, frame);
  t->busy = true;
  uintptr_t address = reinterpret_cast<uintptr_t>(p);
  if (t->hint_block == address) clear_hint(t);
  emit_local_free<kOrdinary>(t, owner_site(owner), address, event_tick<kOrdinary>());
  t->busy = false;
  end_event<kOrdinary>(t);
  leave_runtime(t);
  return true;
}

}  // namespace runtime
}  // namespace heaptype

#endif
