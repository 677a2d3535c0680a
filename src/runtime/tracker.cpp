// tracker.cpp: what happens on each allocation, free and type report.
//
// Everything here runs on the thread that allocates or frees, inside `busy`: a
// signal handler that allocates, frees or names a type while the thread is in here
// does not interleave records with it; it notes the event (pending, see
// drain_pending) and the thread records it as it leaves the runtime.
//
// Probation. operator new names the type of a block itself once its call site is
// known to be typed (call_site_types.hpp); the first block of a call site, and
// every block of an ambiguous one, is allocated untyped and waits for its
// new-expression to report the type, which then moves it (a MOVE record and a new
// owner word). The report normally comes before the program can hand the block to
// another thread, but a constructor may publish `this`, and a thread that then
// frees the block would race with the owner rewriting the header. So such blocks
// carry the probation bit, and another thread's free of one only marks it freed
// (a compare-and-swap on its owner word, as does the owner's rewrite: the only
// read-modify-writes, both off the common path) and leaves the memory to the
// owner, which releases it when the block leaves probation: its type arrives, newer
// blocks push it out (kProbationSlots), or the thread exits.
#include "tracker.hpp"

#include <unistd.h>

#include <cstring>
#include <exception>

#include "external_blocks.hpp"
#include "heaptype/type_id.hpp"
#include "hot_path.hpp"
#include "runtime_imports.hpp"
#include "sanitizer.hpp"

extern "C" {
void __libc_free(void* p);

// What the new-expression's inline check compares with (see heaptype/hint.hpp).
__attribute__((visibility("default"))) __thread heaptype_hint_t heaptype_hint = {nullptr, nullptr};
}

namespace heaptype {

// The type the report shows for a block whose constructor threw (see
// type_constructor_threw). Declared only: its type_id tag is all that is needed.
struct constructor_threw;

namespace runtime {

uint32_t g_epoch = 0;
uint64_t g_seal_secret = 0;

namespace {

// Enters the runtime on the calling thread; nullptr when the event cannot be
// recorded (no state, or a nested call).
class Busy {
 public:
  Busy() : t_(this_thread_state()) {
    if (t_ && t_->busy) t_ = nullptr;
    if (t_) t_->busy = true;
  }
  ~Busy() {
    if (!t_) return;
    t_->busy = false;
    end_event(t_);
    leave_runtime(t_);
  }
  Busy(const Busy&) = delete;
  Busy& operator=(const Busy&) = delete;
  ThreadState* get() const { return t_; }

 private:
  ThreadState* t_;
};

inline uintptr_t address_of(const void* p) { return reinterpret_cast<uintptr_t>(p); }

inline size_t cookie_size(size_t elem_align) { return elem_align > sizeof(size_t) ? elem_align : sizeof(size_t); }

// Does a new-expression's result `p` belong to the block at `block`? It does if it
// is the block itself, or the block plus an array cookie (Itanium C++ ABI: arrays
// of types with non-trivial destructors; the cookie is max(sizeof(size_t),
// alignof(T)) bytes and its last word holds the element count). Sets the count.
// (Reading the cookie is the point: Clang's AddressSanitizer poisons it.)
HEAPTYPE_NO_ASAN bool objects_in_block(uintptr_t block, uint64_t size, uintptr_t p, size_t elem_size,
                                       size_t elem_align, uint64_t* count) {
  if (!elem_size || size == kSizeSaturated) return false;
  if (p == block) {
    *count = size % elem_size == 0 ? size / elem_size : 1;
    return true;
  }
  size_t cookie = cookie_size(elem_align);
  if (p != block + cookie || size < cookie || (size - cookie) % elem_size != 0) return false;
  uint64_t n = (size - cookie) / elem_size;
  if (*reinterpret_cast<const size_t*>(p - sizeof(size_t)) != n) return false;
  *count = n;
  return true;
}

// Header bytes beyond the 16 every tracked block's count implies (see the END chunk).
inline int64_t other_header_bytes(unsigned offset_code, bool tracked) {
  return static_cast<int64_t>(header_offset(offset_code)) - (tracked ? static_cast<int64_t>(kHeaderSize) : 0);
}

inline uint32_t untyped_site(ThreadState* t, uint64_t size, uintptr_t call_site, uint32_t node) {
  return site_number(t, {size, 0, 0, call_site, node});
}

// --- probation ---------------------------------------------------------------------

void remove_probation_slot(ThreadState* t, uint32_t index) {
  std::memmove(&t->probation[index], &t->probation[index + 1],
               (t->probation_count - index - 1) * sizeof(ProbationBlock));
  --t->probation_count;
}

int find_probation(const ThreadState* t, uintptr_t address) {
  for (uint32_t i = t->probation_count; i-- > 0;)
    if (t->probation[i].address == address) return static_cast<int>(i);
  return -1;
}

// Another thread freed the block while it was on probation: this thread records
// the free and releases the memory.
void release_freed_block(ThreadState* t, uintptr_t address, uint64_t owner) {
  emit_free(t, owner, address, event_tick());
  BlockHeader* h = header_of(reinterpret_cast<void*>(address));
  unsigned code = h->seal & kMaxOffsetCode;
  bump(t->other_header_bytes, -other_header_bytes(code, true));
  clear_block_start(reinterpret_cast<void*>(address));
  __libc_free(allocation_base(reinterpret_cast<void*>(address), code));
}

// Ends probation for the block: its owner word loses the bit (or becomes `owner`,
// typed). False when another thread had freed it; it is released then.
bool leave_probation(ThreadState* t, uintptr_t address, uint64_t owner) {
  BlockHeader* h = header_of(reinterpret_cast<void*>(address));
  uint64_t seen = load_owner(h);
  for (;;) {
    uint64_t plain = seen & ~(kOwnerProbation | kOwnerFreed);
    if (seen & kOwnerFreed) {
      release_freed_block(t, address, plain);
      return false;
    }
    if (replace_owner(h, &seen, owner ? owner : plain)) return true;
  }
}

// The block left probation without a type: its call site allocates untyped blocks.
void end_probation_untyped(ThreadState* t, uint32_t index) {
  ProbationBlock b = t->probation[index];
  remove_probation_slot(t, index);
  if (CallSiteType* c = call_site_type(t->call_sites, b.call_site)) learn_untyped(*c);
  leave_probation(t, b.address, 0);
}

void put_on_probation(ThreadState* t, uintptr_t address, uintptr_t call_site, uintptr_t frame, uint32_t node,
                      uint32_t site) {
  if (t->probation_count == kProbationSlots) end_probation_untyped(t, 0);
  t->probation[t->probation_count++] = {address, call_site, frame, node, site};
}

// The type of a block on probation arrived: a typed site, a MOVE there, and the
// call site learns it (unless `learn` is false: heaptype::tag says nothing about
// the call site).
// Returns the block's owner word now, 0 when another thread had freed it (released).
uint64_t type_probation_block(ThreadState* t, uint32_t index, uintptr_t type_tag, uint64_t elem_size,
                              uint64_t offset, uint64_t count, bool learn) {
  ProbationBlock b = t->probation[index];
  remove_probation_slot(t, index);
  CallSiteType* c = call_site_type(t->call_sites, b.call_site);
  if (c && learn) learn_type(t->call_sites, *c, type_tag, elem_size, offset);
  BlockHeader* h = header_of(reinterpret_cast<void*>(b.address));
  uint32_t site = site_number(t, {h->size, count, type_tag, b.call_site, b.node});
  uint64_t old_owner = make_owner(t->number, b.site, false), owner = make_owner(t->number, site, true);
  if (!leave_probation(t, b.address, owner)) return 0;
  emit_move(t, old_owner, site, b.address, event_tick());
  return owner;
}

// A new-expression whose constructor throws frees its block while the exception
// propagates, before the expression could report the type: the compiler's cleanup
// calls operator delete from the function that called operator new, in the same
// frame. Such a block (still on probation, freed by its own thread during unwinding,
// by a call from the frame its allocation was called from) counts as
// `heaptype::constructor_threw`, not as untyped, and teaches its call site nothing.
// A block freed from another frame while an exception unwinds (a destructor's
// `delete`, std::promise's shared state when future::get() throws) is not one: its
// expression completed. Nor is a block allocated outside the object built with the
// runtime (a plain program's, the runtime preloaded), unless new-expressions report
// types in this process (a library built with HeapType): elsewhere no new-expression
// could have named the block had its constructor not thrown. (A raw operator new
// block freed by unwinding code of the same function before it was typed counts as
// constructor_threw too.)
std::atomic<bool> g_new_expressions_report{false};  // set by the first report

// Whether the probation block at `index`, freed by the hook whose frame address is
// `frame` while an exception propagates, is a block whose constructor threw (above).
bool constructor_threw_for(const ThreadState* t, uint32_t index, uintptr_t frame) {
  const ProbationBlock& b = t->probation[index];
  if (!frame || b.frame != frame) return false;  // equal: the callers' stack pointers were
  return in_framed_code(b.call_site) || g_new_expressions_report.load(std::memory_order_relaxed);
}

void type_constructor_threw(ThreadState* t, uint32_t index) {
  BlockHeader* h = header_of(reinterpret_cast<void*>(t->probation[index].address));
  type_probation_block(t, index, reinterpret_cast<uintptr_t>(tag_of<constructor_threw>()), h->size, 0, 1, false);
}

// --- allocation ----------------------------------------------------------------------

}  // namespace

// A block whose (call site, context, size) the memo does not know: the call site's
// learned type decides, and the memo learns the answer unless the block goes on
// probation.
void settle_inexact_reports_of(ThreadState* t, uintptr_t call_site);

uint64_t record_new_call_site(ThreadState* t, uintptr_t p, size_t size, uintptr_t call_site, uint32_t node,
                              uintptr_t frame) {
  // libstdc++'s start-up for the runtime alone (runtime_imports.hpp): untracked. Reached
  // from on_new_block (a 16-byte header); on_block asks before it calls here.
  if (__builtin_expect(g_import_start_up_end != 0, 0) && runtime_import_allocation(call_site)) {
    bump(t->other_header_bytes, static_cast<int64_t>(kHeaderSize));
    return 0;
  }
  if (__builtin_expect(t->inexact_count != 0, 0)) settle_inexact_reports_of(t, call_site);
  SiteMemo* set = memo_set(t->call_sites, call_site, node, size);
  SiteMemo* known = memo_find(set, call_site, node, size);
  CallSiteType* c = call_site_type(t->call_sites, call_site);
  uint64_t count;
  if (c && c->state == CallSiteState::kTyped && typed_count(*c, size, &count)) {
    uint32_t site = site_number(t, {size, count, c->type_tag, call_site, node});
    memo_learn(set, known, {call_site, size, c->type_tag, node, site, c->offset});
    set_hint(t, p, p + c->offset, c->type_tag);
    emit_alloc(t, site, p, event_tick());
    return make_owner(t->number, site, true);
  }
  uint32_t site = untyped_site(t, size, call_site, node);
  clear_hint(t);
  emit_alloc(t, site, p, event_tick());
  uint64_t owner = make_owner(t->number, site, false);
  if (c && c->state == CallSiteState::kUntyped) {
    memo_learn(set, known, {call_site, size, 0, node, site, 0});
    return owner;
  }
  put_on_probation(t, p, call_site, frame, node, site);
  return owner | kOwnerProbation;
}

namespace {

// --- retyping committed blocks ---------------------------------------------------------

// The block at `block` is of `type_tag` x `count` from now on: a site of this
// thread with that type (derived from the owner's site when another thread
// allocated it), a MOVE there, and the owner word names it. `learn`: a
// new-expression's type for a block its call site committed untyped.
void retype(ThreadState* t, uintptr_t block, uint64_t owner, uintptr_t type_tag, uint64_t count, bool learn) {
  uint32_t thread = owner_thread(owner), site = owner_site(owner);
  uint32_t new_site;
  if (thread == t->number) {
    const SiteKey* def = site_definition(t, site);
    if (!def) {
      // A site of a forgotten generation: the new one is derived from it.
      new_site = derived_site_number(t, thread, site, type_tag, count);
    } else if (def->site.type_tag == type_tag && def->site.count == count) {
      return;  // named so already
    } else if (def->base) {
      uint64_t base = def->base - 1;
      new_site = derived_site_number(t, owner_thread(base), owner_site(base), type_tag, count);
    } else {
      format::Site typed = def->site;
      typed.type_tag = type_tag;
      typed.count = count;
      new_site = site_number(t, typed);
      if (learn)
        if (CallSiteType* c = call_site_type(t->call_sites, typed.call_site)) learn_late_type(t->call_sites, *c);
    }
  } else {
    new_site = derived_site_number(t, thread, site, type_tag, count);
  }
  emit_move(t, owner, new_site, block, thread == t->number ? event_tick() : meeting_tick());
  uint64_t moved = make_owner(t->number, new_site, true);
  if (external_lookup(block)) {
    external_update(block, moved);
  } else {
    store_owner(header_of(reinterpret_cast<void*>(block)), moved);
  }
}

// A tracked block of this process starting at `p` (any address: exact, see
// block_starts.hpp): its header, else nullptr.
BlockHeader* tracked_block(uintptr_t p) {
  unsigned code;
  BlockHeader* h = sealed_header(reinterpret_cast<void*>(p), &code);
  return h && owner_current(load_owner(h)) ? h : nullptr;
}

// --- reports that may not be the new-expression's -----------------------------------
//
// A new-expression's constructor runs before the expression reports its type, and a
// placement new in it at the object's own address (a first member built in place:
// kj::Maybe, boost::optional, a union member) reports first, with the member's type.
// Such a report does not fill the block: neither does an array's own (new char[n], no
// cookie), so it cannot be told from one. A report at a probation block's start that
// does not fill it types the block at once, but is remembered, and the call site
// learns nothing from it yet: a later report for the block that fills it exactly (the
// new-expression's own, once the constructor has returned) retypes the block and
// teaches the call site. When the call site allocates again with none (an array), or
// the report is pushed out by newer ones, the call site learns the first report's type.
//
// A call site's type, contested. A call site typed by its first blocks names the type
// of the next at once (the hint), and the new-expression's check that agrees claims
// the hint (heaptype/hint.hpp). A report of another type at the start of such a block
// before the claim is either a first member's (the check follows, once the
// constructor returns) or the only report the block gets: a raw allocation function
// that several types share (`void* allocate(size_t)` returning `operator new(n)`, the
// caller's placement new naming the type; Cap'n Proto's heap arrays). So the block
// takes the report's type at once, remembered with the call site's: its own report of
// that type, if it comes, types it back, and the call site keeps its type; else, as
// above, the call site learns the report's type, which makes it ambiguous (its blocks
// wait on probation for their own reports from then on). A report after the claim is
// placement new into a block that has its type already (a pool's storage): ignored.

void forget_inexact(ThreadState* t, uint32_t index) {
  std::memmove(&t->inexact[index], &t->inexact[index + 1], (t->inexact_count - index - 1) * sizeof(InexactReport));
  --t->inexact_count;
}

// The report stands: its call site learns its type.
void settle_inexact(ThreadState* t, uint32_t index) {
  InexactReport r = t->inexact[index];
  forget_inexact(t, index);
  if (CallSiteType* c = call_site_type(t->call_sites, r.call_site))
    learn_type(t->call_sites, *c, r.type_tag, r.elem_size, 0);
}

void remember_inexact(ThreadState* t, const InexactReport& r) {
  if (t->inexact_count == kInexactSlots) settle_inexact(t, 0);
  t->inexact[t->inexact_count++] = r;
}

// The exact report of a block an inexact report typed: retypes it, teaches the call
// site (a contested call site's own type: keeps it); false when `object` is no such
// block (or no longer: its owner word changed, freed and allocated again) or the report
// is not the block's own (does not fill it; not of the contested call site's type).
bool take_exact_report(ThreadState* t, uintptr_t object, uintptr_t type_tag, uint64_t elem_size, size_t elem_align) {
  for (uint32_t i = 0; i < t->inexact_count; ++i) {
    InexactReport r = t->inexact[i];
    // A contested call site's own report may come past an array cookie.
    bool past_cookie = r.predicted && r.address + cookie_size(elem_align) == object;
    if (r.address != object && !past_cookie) continue;
    BlockHeader* h = tracked_block(r.address);
    if (!h || load_owner(h) != r.owner) {
      forget_inexact(t, i);
      return false;
    }
    uint64_t count = 1;
    if (r.predicted) {
      if (type_tag != r.predicted || !objects_in_block(r.address, h->size, object, elem_size, elem_align, &count))
        return false;
      forget_inexact(t, i);
      retype(t, r.address, r.owner, type_tag, count, false);
      return true;
    }
    if (h->size != elem_size) return false;
    forget_inexact(t, i);
    retype(t, object, r.owner, type_tag, 1, false);
    if (CallSiteType* c = call_site_type(t->call_sites, r.call_site)) learn_type(t->call_sites, *c, type_tag, elem_size, 0);
    return true;
  }
  return false;
}

// A report of another type for the block this thread allocated last, which its call
// site typed, before its new-expression's check claimed the hint ("A call site's type,
// contested" above): the block takes it, remembered. False when the report is not one.
bool contest_call_site_type(ThreadState* t, uintptr_t object, uintptr_t type_tag, size_t elem_size,
                            size_t elem_align) {
  uintptr_t block = t->hint_block;
  if (!block || !heaptype_hint.object) return false;  // claimed, or no block named at its allocation
  uintptr_t predicted = reinterpret_cast<uintptr_t>(heaptype_hint.type_tag);
  BlockHeader* h = tracked_block(block);
  if (!h || predicted == type_tag) return false;
  uint64_t owner = load_owner(h), count;
  if (!owner_typed(owner) || (owner & kOwnerProbation) || owner_thread(owner) != t->number) return false;
  if (!objects_in_block(block, h->size, object, elem_size, elem_align, &count)) return false;
  const SiteKey* def = site_definition(t, owner_site(owner));
  if (!def || def->base) return false;
  uintptr_t call_site = def->site.call_site;
  retype(t, block, owner, type_tag, count, false);
  clear_hint(t);  // the new-expression's own check, if one follows, reports
  remember_inexact(t, {block, call_site, load_owner(h), type_tag, elem_size, predicted});
  return true;
}

}  // namespace

// A call site allocates: a report of its last block that no exact one followed stands.
void settle_inexact_reports_of(ThreadState* t, uintptr_t call_site) {
  for (uint32_t i = 0; i < t->inexact_count; ++i)
    if (t->inexact[i].call_site == call_site) return settle_inexact(t, i);
}

namespace {

// A new-expression's type for a block that is not on probation: placement new, or
// a constructor that allocated so much that the block left probation first. Only
// an untyped block whose size agrees with the objects (and the array cookie) takes it.
void type_committed_block(ThreadState* t, uintptr_t object, uintptr_t type_tag, size_t elem_size,
                          size_t elem_align, bool learn) {
  uintptr_t block = object;
  BlockHeader* h = tracked_block(block);
  if (!h && object > cookie_size(elem_align)) {
    block = object - cookie_size(elem_align);
    h = tracked_block(block);
  }
  if (!h) return;
  uint64_t owner = load_owner(h), count;
  if (owner_typed(owner) || (owner & kOwnerProbation)) return;
  if (!objects_in_block(block, h->size, object, elem_size, elem_align, &count)) return;
  retype(t, block, owner, type_tag, count, learn);
}

// A new-expression's or an allocator's report of the type of `object`.
void type_reported(ThreadState* t, uintptr_t object, uintptr_t type_tag, size_t elem_size, size_t elem_align) {
  for (uint32_t i = t->probation_count; i-- > 0;) {
    uintptr_t block = t->probation[i].address;
    uint64_t size = header_of(reinterpret_cast<void*>(block))->size, count;
    if (objects_in_block(block, size, object, elem_size, elem_align, &count)) {
      bool inexact = object == block && elem_size != size;  // see "Reports that may not be ..."
      ProbationBlock b = t->probation[i];
      uint64_t owner = type_probation_block(t, i, type_tag, elem_size, object - block, count, !inexact);
      if (inexact && owner) remember_inexact(t, {b.address, b.call_site, owner, type_tag, elem_size, 0});
      return;
    }
  }
  if (t->inexact_count && take_exact_report(t, object, type_tag, elem_size, elem_align)) return;
  if (contest_call_site_type(t, object, type_tag, elem_size, elem_align)) return;
  type_committed_block(t, object, type_tag, elem_size, elem_align, true);
}

// Memory the runtime did not allocate (or allocated while recording was stopped)
// becomes a tracked block of `size` bytes.
void track_unseen(ThreadState* t, uintptr_t p, uint64_t size, uintptr_t type_tag, uint64_t count,
                  uintptr_t call_site, uintptr_t frame) {
  uint32_t node = g_contexts_enabled ? allocation_context(t, call_site, frame) : 0;
  uint32_t site = site_number(t, {size, count, type_tag, call_site, node});
  uint64_t owner = make_owner(t->number, site, true);
  unsigned code;
  BlockHeader* h = sealed_header(reinterpret_cast<void*>(p), &code);
  if (h && !load_owner(h)) {
    store_owner(h, owner);  // its header counts as a tracked block's now
    bump(t->other_header_bytes, other_header_bytes(code, true) - other_header_bytes(code, false));
  } else if (!external_insert(p, owner)) {
    return;
  }
  emit_alloc(t, site, p, event_tick());
}

// A block's free: the records, and whether its memory can go now.
bool record_free(ThreadState* t, uintptr_t p, BlockHeader* h, uintptr_t frame) {
  uint64_t owner = load_owner(h);
  if (!owner_current(owner)) {
    bump(t->untracked_frees, 1);
    return true;
  }
  if (owner & kOwnerProbation) {
    if (owner_thread(owner) == t->number) {
      int index = find_probation(t, p);
      if (index >= 0 && !(owner & kOwnerFreed) && std::uncaught_exceptions() > 0 &&
          constructor_threw_for(t, static_cast<uint32_t>(index), frame)) {
        type_constructor_threw(t, static_cast<uint32_t>(index));
        owner = load_owner(h);
      } else if (index >= 0) {
        if (CallSiteType* c = call_site_type(t->call_sites, t->probation[index].call_site)) learn_untyped(*c);
        remove_probation_slot(t, static_cast<uint32_t>(index));
      }
      owner &= ~kOwnerProbation;
    } else {
      // The owner releases it when the block leaves probation (see the top).
      while (owner & kOwnerProbation)
        if (replace_owner(h, &owner, owner | kOwnerFreed)) return false;
    }
  }
  if (t->hint_block == p) clear_hint(t);
  bool local = owner_thread(owner) == t->number;
  emit_free(t, owner, p, local ? event_tick() : meeting_tick());
  return true;
}

// --- signal handlers inside the runtime ---------------------------------------------------
//
// A handler that runs while its thread is busy only appends to the thread's pending
// events (a slot, then the count: nothing the interrupted code touches), and the
// thread records them in drain_pending as it leaves the runtime. A block the
// handler allocates carries pending_owner() until then: the probation bit, so that
// a free of it (by the handler, or by another thread it was handed to) only marks
// it freed and the thread releases it while draining. When the slots are full the
// event goes unrecorded, as before they existed.

bool push_pending(ThreadState* t, const PendingEvent& e) {
  uint32_t n = __atomic_load_n(&t->pending_count, __ATOMIC_RELAXED);
  if (n == kPendingSlots) return false;
  t->pending[n] = e;
  __atomic_store_n(&t->pending_count, n + 1, __ATOMIC_RELEASE);
  return true;
}

inline uint64_t pending_owner(const ThreadState* t) { return t->owner_base | kOwnerProbation; }

// A handler's free while its thread is busy. False: the memory stays (a block on
// probation: its owner releases it, as for another thread's free).
bool defer_free(void* p, BlockHeader* h) {
  ThreadState* t = tls_thread_state;
  uint64_t owner = load_owner(h);
  if (owner_current(owner) && (owner & kOwnerProbation)) {
    while (owner & kOwnerProbation)
      if (replace_owner(h, &owner, owner | kOwnerFreed)) return false;
  }
  PendingEvent e{};
  e.kind = PendingKind::kFree;
  e.offset_code = static_cast<uint8_t>(h->seal & kMaxOffsetCode);
  e.tracked = owner_current(owner);
  e.address = address_of(p);
  e.owner = owner;
  push_pending(t, e);  // full: the free goes unrecorded
  return true;
}

void defer_type(const void* p, uintptr_t type_tag, size_t elem_size, size_t elem_align, uint64_t count = 0) {
  ThreadState* t = tls_thread_state;
  if (!t) return;
  PendingEvent e{};
  e.kind = PendingKind::kType;
  e.address = address_of(p);
  e.type_tag = type_tag;
  e.size = elem_size;
  e.elem_align = elem_align;
  e.count = count;
  push_pending(t, e);
}

// Whether the deferred type report `r` names the pending block `e`; sets the count of
// its objects: an allocator's, at the block's end (heaptype_tag_allocation), or those
// a new-expression's result holds.
bool pending_type_names(const PendingEvent& e, const PendingEvent& r, uint64_t* count) {
  if (r.kind != PendingKind::kType) return false;
  if (!r.count) return objects_in_block(e.address, e.size, r.address, r.size, r.elem_align, count);
  if (r.address != e.address || !r.size || r.count > e.size / r.size) return false;
  *count = r.count;
  return true;
}

// The handler's block pending[index]: its ALLOC record, with the type its
// new-expression reported (a later kType event), at its call site (the handler's
// frames are gone: no deeper context). Then the owner word takes the site; a block
// freed meanwhile gets its FREE record and its memory goes.
void record_pending_alloc(ThreadState* t, uint32_t index, uint32_t count) {
  const PendingEvent e = t->pending[index];
  uint64_t n = 0;
  uint32_t site = 0;
  bool typed = false;
  for (uint32_t j = index + 1; j < count && !typed; ++j) {
    const PendingEvent& r = t->pending[j];
    if (pending_type_names(e, r, &n)) {
      site = site_number(t, {e.size, n, r.type_tag, e.call_site, 0});
      typed = true;
    }
  }
  if (!typed) site = untyped_site(t, e.size, e.call_site, 0);
  uint64_t owner = make_owner(t->number, site, typed);
  emit_alloc(t, site, e.address, event_tick());
  bump(t->other_header_bytes, other_header_bytes(e.offset_code, true));
  BlockHeader* h = header_of(reinterpret_cast<void*>(e.address));
  uint64_t seen = load_owner(h);
  while (!(seen & kOwnerFreed))
    if (replace_owner(h, &seen, owner)) return;
  emit_local_free(t, site, e.address, event_tick());
  bump(t->other_header_bytes, -other_header_bytes(e.offset_code, true));
  clear_block_start(reinterpret_cast<void*>(e.address));
  __libc_free(allocation_base(reinterpret_cast<void*>(e.address), e.offset_code));
}

}  // namespace

void on_block(void* p, size_t size, unsigned offset_code, unsigned family, uintptr_t call_site, uintptr_t frame) {
  ThreadState* t = tls_thread_state;
  if (__builtin_expect(!t, 0)) t = create_thread_state();
  uint64_t owner = 0;
  if (t && t->busy && !t->own_call && g_recording.load(std::memory_order_relaxed)) {
    PendingEvent e{};
    e.kind = PendingKind::kAlloc;
    e.offset_code = static_cast<uint8_t>(offset_code);
    e.address = address_of(p);
    e.size = size;
    e.call_site = call_site;
    if (push_pending(t, e)) {
      write_header(p, size, offset_code, family, pending_owner(t));
      return;
    }
  }
  if (t && !t->busy && g_recording.load(std::memory_order_relaxed) &&
      !(g_import_start_up_end && runtime_import_allocation(call_site))) {
    t->busy = true;
    uintptr_t address = address_of(p);
    uint32_t node = g_contexts_enabled ? allocation_context(t, call_site, frame) : 0;
    if (!record_known_allocation<false>(t, address, size, call_site, node, &owner))
      owner = record_new_call_site(t, address, size, call_site, node, frame);
    t->busy = false;
  }
  write_header(p, size, offset_code, family, owner);
  if (t) {
    bump(t->other_header_bytes, other_header_bytes(offset_code, owner != 0));
    if (owner) {
      end_event(t);
      leave_runtime(t);
    }
  }
}

// Also the slow path of on_typed_block: the thread's first block, a nested call.
void on_typed_aligned_block(void* p, size_t size, unsigned offset_code, unsigned family, uintptr_t type_tag,
                            uint64_t count, uintptr_t call_site, uintptr_t frame) {
  ThreadState* t = tls_thread_state;
  if (__builtin_expect(!t, 0)) t = create_thread_state();
  uint64_t owner = 0;
  if (t && !t->busy && g_recording.load(std::memory_order_relaxed)) {
    t->busy = true;
    uint32_t node = g_contexts_enabled ? allocation_context(t, call_site, frame) : 0;
    uint32_t site = site_number(t, {size, count, type_tag, call_site, node});
    if (t->hint_block) clear_hint(t);
    emit_alloc(t, site, address_of(p), event_tick());
    owner = make_owner(t->number, site, true);
    t->busy = false;
  }
  write_header(p, size, offset_code, family, owner);
  if (t) {
    bump(t->other_header_bytes, other_header_bytes(offset_code, owner != 0));
    if (owner) end_event(t);
  }
}

void on_finding(const void* p, const BlockHeader* h, unsigned kind, uint64_t a, uint64_t b, uintptr_t call_site,
                uintptr_t frame) {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  Busy scope;
  ThreadState* t = scope.get();
  if (!t) return;
  uint64_t owner = h ? load_owner(h) : 0;
  if (!owner && g_external_count.load(std::memory_order_relaxed)) owner = external_lookup(address_of(p));
  bool known = owner_current(owner);
  uint32_t node = g_contexts_enabled ? allocation_context(t, call_site, frame) : 0;
  emit_finding(t, static_cast<format::FindingKind>(kind), known ? owner_thread(owner) : 0,
               known ? owner_site(owner) : 0, a, b, call_site, node, event_tick());
}

bool on_release(void* p, BlockHeader* h, uintptr_t frame) {
  Busy scope;
  ThreadState* t = scope.get();
  if (!t) return defer_free(p, h);  // a signal handler inside the runtime
  bool tracked = owner_current(load_owner(h));
  bool release = record_free(t, address_of(p), h, frame);
  if (release) bump(t->other_header_bytes, -other_header_bytes(h->seal & kMaxOffsetCode, tracked));
  return release;
}

void on_reallocated_away(void* old, const BlockHeader& saved) {
  {
    Busy scope;
    if (ThreadState* t = scope.get()) {
      uint64_t owner = saved.owner;
      if (owner_current(owner)) {
        if (t->hint_block == address_of(old)) clear_hint(t);
        bool local = owner_thread(owner) == t->number;
        emit_free(t, owner, address_of(old), local ? event_tick() : meeting_tick());
      } else {
        bump(t->untracked_frees, 1);
        bump(t->other_header_bytes, -other_header_bytes(0, false));
      }
    }
  }
}

void on_reallocated(void* old, void* p, const BlockHeader& saved, size_t size, uintptr_t call_site,
                    uintptr_t frame) {
  on_reallocated_away(old, saved);
  on_new_block<false>(p, size, kFamilyMalloc, call_site, frame);
}

void on_foreign_release(void* p) {
  Busy scope;
  ThreadState* t = scope.get();
  if (!t) return;
  uint64_t owner = g_external_count.load(std::memory_order_relaxed) ? external_remove(address_of(p)) : 0;
  if (!owner_current(owner)) {
    bump(t->untracked_frees, 1);
    return;
  }
  bool local = owner_thread(owner) == t->number;
  emit_free(t, owner, address_of(p), local ? event_tick() : meeting_tick());
}

void on_tag_new(const void* p, uintptr_t type_tag, size_t elem_size, size_t elem_align) {
  if (!p || !headers_on()) return;
  if (!g_new_expressions_report.load(std::memory_order_relaxed))
    g_new_expressions_report.store(true, std::memory_order_relaxed);
  Busy scope;
  if (ThreadState* t = scope.get())
    type_reported(t, address_of(p), type_tag, elem_size, elem_align);
  else
    defer_type(p, type_tag, elem_size, elem_align);
}

namespace {

// An allocator's report: the block at `block` ends with `count` objects of `elem_size`
// bytes, after a header of the bytes before them (none for an allocator's T[n]; a
// copy-on-write string's _Rep before its characters). A count that does not fit the
// block is ignored, the objects counted as for any report.
void type_allocation(ThreadState* t, uintptr_t block, uintptr_t type_tag, size_t elem_size, size_t count) {
  for (uint32_t i = t->probation_count; i-- > 0;) {
    if (t->probation[i].address != block) continue;
    uint64_t size = header_of(reinterpret_cast<void*>(block))->size;
    if (elem_size && size != kSizeSaturated && count <= size / elem_size) {
      type_probation_block(t, i, type_tag, elem_size, size - count * elem_size, count, true);
      return;
    }
    break;
  }
  type_reported(t, block, type_tag, elem_size, 1);
}

}  // namespace

void on_tag_allocation(const void* p, uintptr_t type_tag, size_t elem_size, size_t count) {
  if (!p || !headers_on() || !count) return;
  Busy scope;
  if (ThreadState* t = scope.get())
    type_allocation(t, address_of(p), type_tag, elem_size, count);
  else
    defer_type(p, type_tag, elem_size, 1, count);
}

namespace {

// A type for the tracked block at `p` that says nothing about its call site
// (heaptype::tag, a thrown object): a MOVE to a site with that type. False when `p`
// is no tracked block of ours (exactly: block_starts.hpp), another thread's block
// still on probation, or a block of `longer_than` bytes or less (0: any block; a
// positive bound also leaves memory tracked without a header alone).
bool retype_tracked(ThreadState* t, uintptr_t p, uintptr_t type_tag, size_t elem_size, uint64_t count,
                    uint64_t longer_than, bool* untracked) {
  int index = find_probation(t, p);
  if (index >= 0) {
    if (header_of(reinterpret_cast<void*>(p))->size <= longer_than) return false;
    type_probation_block(t, static_cast<uint32_t>(index), type_tag, elem_size, 0, count, false);
    return true;
  }
  uint64_t owner = longer_than ? 0 : external_lookup(p);
  if (!owner)
    if (BlockHeader* h = tracked_block(p)) owner = h->size > longer_than ? load_owner(h) : 0;
  *untracked = !owner_current(owner);
  if (owner & kOwnerProbation) return false;  // another thread's, still waiting for its own type
  if (*untracked) return false;
  retype(t, p, owner, type_tag, count, false);
  return true;
}

}  // namespace

void on_tag_block(const void* ptr, uintptr_t type_tag, size_t elem_size, size_t count, uintptr_t call_site,
                  uintptr_t frame) {
  if (!ptr || !runtime_active()) return;
  Busy scope;
  ThreadState* t = scope.get();
  if (!t) return;
  uintptr_t p = address_of(ptr);
  bool untracked = false;
  if (retype_tracked(t, p, type_tag, elem_size, count, 0, &untracked) || !untracked) return;
  if (g_recording.load(std::memory_order_relaxed))
    track_unseen(t, p, static_cast<uint64_t>(elem_size) * count, type_tag, count, call_site, frame);
}

void on_retype_block(const void* ptr, uint64_t longer_than, uintptr_t type_tag, size_t elem_size, uint64_t count) {
  if (!ptr || !headers_on()) return;
  Busy scope;
  ThreadState* t = scope.get();
  if (!t) return;
  bool untracked = false;
  retype_tracked(t, address_of(ptr), type_tag, elem_size, count, longer_than, &untracked);
}

void on_untag(const void* ptr) {
  if (!ptr || !headers_on()) return;
  Busy scope;
  ThreadState* t = scope.get();
  if (!t) return;
  uintptr_t p = address_of(ptr);
  uint64_t owner = external_remove(p);
  if (owner_current(owner)) {
    emit_free(t, owner, p, owner_thread(owner) == t->number ? event_tick() : meeting_tick());
    return;
  }
  BlockHeader* h = tracked_block(p);
  if (!h) return;
  owner = load_owner(h);
  if ((owner & kOwnerProbation) && owner_thread(owner) != t->number) return;  // see on_tag_block
  int index = find_probation(t, p);
  if (index >= 0) end_probation_untyped(t, static_cast<uint32_t>(index));
  if (record_free(t, p, h, 0)) {  // the memory stays: an untracked block now, its header too
    store_owner(h, 0);
    bump(t->other_header_bytes, other_header_bytes(h->seal & kMaxOffsetCode, false) -
                                    other_header_bytes(h->seal & kMaxOffsetCode, true));
  }
}

void end_own_probation(void* ptr, BlockHeader* h) {
  Busy scope;
  ThreadState* t = scope.get();
  if (!t) return;
  uint64_t owner = load_owner(h);
  if (!(owner & kOwnerProbation) || (owner & kOwnerFreed) || owner_thread(owner) != t->number) return;
  int index = find_probation(t, address_of(ptr));
  if (index >= 0) end_probation_untyped(t, static_cast<uint32_t>(index));
}

// Thread exit: every block on probation leaves it (see the top).
void end_all_probation(ThreadState* t) {
  if (__atomic_load_n(&t->pending_count, __ATOMIC_RELAXED)) drain_pending(t);
  t->busy = true;
  while (t->probation_count) end_probation_untyped(t, t->probation_count - 1);
  t->busy = false;
  end_event(t);
}

void drain_pending(ThreadState* t) {
  t->busy = true;
  for (uint32_t i = 0;;) {
    uint32_t count = __atomic_load_n(&t->pending_count, __ATOMIC_ACQUIRE);
    if (i == count) {
      // Done, unless a handler added one since (it runs on this thread: a CAS
      // that fails means it did).
      if (__atomic_compare_exchange_n(&t->pending_count, &count, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        break;
      continue;
    }
    const PendingEvent& e = t->pending[i];
    if (e.kind == PendingKind::kAlloc) {
      record_pending_alloc(t, i, count);
    } else if (e.kind == PendingKind::kFree) {
      if (owner_current(e.owner))
        emit_free(t, e.owner, e.address, owner_thread(e.owner) == t->number ? event_tick() : meeting_tick());
      else
        bump(t->untracked_frees, 1);
      bump(t->other_header_bytes, -other_header_bytes(e.offset_code, e.tracked));
    }  // kType: the allocation before it took it (a retyping of another block is not replayed)
    ++i;
  }
  t->busy = false;
  end_event(t);
}

}  // namespace runtime
}  // namespace heaptype
