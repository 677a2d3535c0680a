#include "tracker.hpp"

#include "call_context.hpp"
#include "clock.hpp"
#include "registry.hpp"
#include "thread_state.hpp"

namespace heaptype {
namespace runtime {
namespace {

// The runtime never allocates through operator new itself, but the program's
// new_handler or a signal handler might run inside it: such nested calls are
// passed through untracked rather than deadlocking on the thread's own lock.
__thread bool tls_busy __attribute__((tls_model("initial-exec"))) = false;

class ThreadScope {
 public:
  explicit ThreadScope(bool create) {
    if (tls_busy) return;
    t_ = create ? this_thread_state() : this_thread_state_if_any();
    if (!t_) return;
    tls_busy = true;
    t_->lock.lock();
  }
  ~ThreadScope() {
    if (!t_) return;
    if (__builtin_expect(finished(), 0)) flush_events(t_);
    t_->lock.unlock();
    tls_busy = false;
  }
  ThreadState* get() const { return t_; }

 private:
  ThreadState* t_ = nullptr;
};

void record_replaced(ThreadState* t, uintptr_t address, uint64_t stale_owner) {
  // The address came back from malloc while still registered: its block was
  // released without operator delete. Close it so it is not reported as live.
  emit_free(t, stale_owner, address, now_us());
}

void register_block(ThreadState* t, uintptr_t address, uint64_t size, uintptr_t call_site,
                    uintptr_t caller_sp, uintptr_t type_tag, uint64_t count) {
  uint64_t now = now_us();
  commit_pending(t);
  uint32_t node = allocation_context(t, call_site, caller_sp);
  // The owner word names the untyped site until the type arrives (a typed commit
  // rewrites it), so that a free by another thread always finds a site.
  uint32_t site = site_number(t, {size, 0, 0, call_site, node});
  uint64_t stale = registry_insert(address, make_owner(t->number, site));
  if (stale) record_replaced(t, address, stale);
  t->pending = {address, size, call_site, type_tag, count, now, node, site, true};
}

// Does a new-expression's result `p` belong to the block at `block`? It does if it
// is the block itself, or the block plus an array cookie (Itanium C++ ABI: arrays
// of types with non-trivial destructors; the cookie is max(sizeof(size_t),
// alignof(T)) bytes and its last word holds the element count). Sets the count.
bool objects_in_block(uintptr_t block, uint64_t size, uintptr_t p, size_t elem_size,
                      size_t elem_align, uint64_t* count) {
  if (!elem_size) return false;
  if (p == block) {
    *count = size % elem_size == 0 ? size / elem_size : 1;
    return true;
  }
  size_t cookie = elem_align > sizeof(size_t) ? elem_align : sizeof(size_t);
  if (p != block + cookie || size < cookie || (size - cookie) % elem_size != 0) return false;
  uint64_t n = (size - cookie) / elem_size;
  if (*reinterpret_cast<const size_t*>(p - sizeof(size_t)) != n) return false;
  *count = n;
  return true;
}

inline size_t cookie_size(size_t elem_align) {
  return elem_align > sizeof(size_t) ? elem_align : sizeof(size_t);
}

// The block at `address` (owned by `owner`) is of `type_tag` x `count` from now
// on: a site of this thread with that type (derived from the owner's site when
// another thread allocated it), a MOVE there, and the owner word names it.
void move_to_type(ThreadState* t, uintptr_t address, uint64_t owner, uintptr_t type_tag, uint64_t count) {
  uint32_t thread = owner_thread(owner), site = owner_site(owner);
  uint32_t new_site;
  if (thread == t->number) {
    const SiteKey* def = site_definition(t, site);
    if (!def) return;
    if (def->site.type_tag == type_tag && def->site.count == count) return;  // named so already
    if (def->base) {
      new_site = derived_site_number(t, owner_thread(def->base - 1), owner_site(def->base - 1), type_tag, count);
    } else {
      format::Site typed = def->site;
      typed.type_tag = type_tag;
      typed.count = count;
      new_site = site_number(t, typed);
    }
  } else {
    new_site = derived_site_number(t, thread, site, type_tag, count);
  }
  emit_move(t, owner, new_site, address, now_us());
  registry_insert(address, make_owner(t->number, new_site));
}

// This thread's untyped block at `block`, and its size; false for a typed block
// or one of another thread (whose site table this thread cannot read).
bool untyped_local_block(ThreadState* t, uint64_t owner, uint64_t* size) {
  if (owner_thread(owner) != t->number) return false;
  const SiteKey* def = site_definition(t, owner_site(owner));
  if (!def || def->base || def->site.type_tag) return false;
  *size = def->site.size;
  return true;
}

}  // namespace

void on_alloc(void* p, size_t size, uintptr_t call_site, uintptr_t caller_sp) {
  if (!runtime_active() || !g_recording.load(std::memory_order_relaxed)) return;
  ThreadScope scope(true);
  if (ThreadState* t = scope.get())
    register_block(t, reinterpret_cast<uintptr_t>(p), size, call_site, caller_sp, 0, 0);
}

uint64_t detach_block(void* p) {
  if (!runtime_active()) return 0;
  ThreadScope scope(true);
  ThreadState* t = scope.get();
  if (!t) return 0;
  commit_pending(t);  // the owner word of a pending block is final once committed
  uint64_t owner = registry_remove(reinterpret_cast<uintptr_t>(p));
  if (!owner) ++t->untracked_frees;
  return owner;
}

void record_free(uint64_t owner, void* p) {
  ThreadScope scope(true);
  ThreadState* t = scope.get();
  if (!t) return;
  commit_pending(t);
  emit_free(t, owner, reinterpret_cast<uintptr_t>(p), now_us());
}

void on_free(void* p) {
  if (!runtime_active()) return;
  ThreadScope scope(true);
  ThreadState* t = scope.get();
  if (!t) return;
  commit_pending(t);
  uint64_t owner = registry_remove(reinterpret_cast<uintptr_t>(p));
  if (!owner) {
    ++t->untracked_frees;
    return;
  }
  emit_free(t, owner, reinterpret_cast<uintptr_t>(p), now_us());
}

void on_realloc_done(uint64_t old_owner, void* old, void* p, size_t size, uintptr_t call_site,
                     uintptr_t caller_sp) {
  if (!p && size) {
    // Failed: `old` was not released; it is tracked again under its own record.
    if (old_owner) registry_insert(reinterpret_cast<uintptr_t>(old), old_owner);
    return;
  }
  if (old_owner) record_free(old_owner, old);
  if (p) on_alloc(p, size, call_site, caller_sp);
}

void on_tag_new(const void* ptr, uintptr_t type_tag, size_t elem_size, size_t elem_align) {
  if (!ptr || !runtime_active()) return;
  ThreadScope scope(true);
  ThreadState* t = scope.get();
  if (!t) return;
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  PendingAlloc& a = t->pending;
  uint64_t count;
  if (a.valid && !a.type_tag && objects_in_block(a.address, a.size, p, elem_size, elem_align, &count)) {
    // The common case: the block operator new just returned. One record, typed.
    a.type_tag = type_tag;
    a.count = count;
    commit_pending(t);
    return;
  }
  // The constructor allocated in between, or this is placement new: a block of
  // this thread that starts at the address, or one array cookie before it, and
  // is still untyped takes the type if the cookie agrees with its size.
  commit_pending(t);
  uintptr_t block = p;
  uint64_t owner = registry_lookup(block);
  if (!owner && p > cookie_size(elem_align)) {
    block = p - cookie_size(elem_align);
    owner = registry_lookup(block);
  }
  uint64_t size;
  if (!owner || !untyped_local_block(t, owner, &size)) return;
  if (!objects_in_block(block, size, p, elem_size, elem_align, &count)) return;
  move_to_type(t, block, owner, type_tag, count);
}

void on_tag_block(const void* ptr, uintptr_t type_tag, size_t elem_size, size_t count,
                  uintptr_t call_site) {
  if (!ptr || !runtime_active()) return;
  ThreadScope scope(true);
  ThreadState* t = scope.get();
  if (!t) return;
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  PendingAlloc& a = t->pending;
  if (a.valid && a.address == p) {
    a.type_tag = type_tag;
    a.count = count;
    commit_pending(t);
    return;
  }
  commit_pending(t);
  if (uint64_t owner = registry_lookup(p)) {
    move_to_type(t, p, owner, type_tag, count);
    return;
  }
  // Memory HeapType never saw (malloc before start(), a pool): it becomes a
  // tracked block, until heaptype::untag() releases it.
  if (!g_recording.load(std::memory_order_relaxed)) return;
  register_block(t, p, static_cast<uint64_t>(elem_size) * count, call_site,
                 reinterpret_cast<uintptr_t>(__builtin_frame_address(0)), type_tag, count);
  commit_pending(t);
}

void on_untag(const void* p) { on_free(const_cast<void*>(p)); }

}  // namespace runtime
}  // namespace heaptype
