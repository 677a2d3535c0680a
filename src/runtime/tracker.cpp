#include "tracker.hpp"

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

// How many T a block holds when a new-expression returned `p` for it: `p` is the
// block itself, or the block plus an array cookie holding the element count
// (Itanium C++ ABI: types with non-trivial destructors; the cookie is
// max(sizeof(size_t), alignof(T)) bytes and its last word is the count).
bool objects_in_block(uintptr_t block, uint64_t size, uintptr_t p, size_t elem_size,
                      size_t elem_align, uint64_t* count) {
  if (!elem_size) return false;
  if (p == block) {
    *count = size % elem_size == 0 ? size / elem_size : 1;
    return true;
  }
  size_t cookie = elem_align > sizeof(size_t) ? elem_align : sizeof(size_t);
  if (p != block + cookie || size < cookie) return false;
  uint64_t n = (size - cookie) / elem_size;
  if ((size - cookie) % elem_size != 0) return false;
  if (*reinterpret_cast<const size_t*>(p - sizeof(size_t)) != n) return false;
  *count = n;
  return true;
}

void record_replaced(ThreadState* t, const Block& stale) {
  // The address came back from malloc while still registered: its block was
  // released without operator delete. Close it so it is not reported as live.
  commit_pending(t);
  emit_free(t, owner_thread(stale.owner), owner_number(stale.owner), now_us());
}

void register_block(ThreadState* t, uintptr_t address, uint64_t size, uintptr_t call_site,
                    uintptr_t type_tag, uint64_t count) {
  uint64_t now = now_us();
  commit_pending(t);
  Block block = {address, size, make_owner(t->number, t->next_alloc_number++), type_tag};
  Block stale;
  if (registry_insert(block, &stale)) record_replaced(t, stale);
  t->pending = {address, size, call_site, type_tag, count, now, true};
}

// A type report for a block that is no longer pending: name it in the registry
// (first type wins) and tell the profile with a RETYPE record. False when
// `block_address` holds no tracked block that `p` can be the object of.
bool retype_registered(ThreadState* t, uintptr_t block_address, uintptr_t p, uintptr_t type_tag,
                       size_t elem_size, size_t elem_align) {
  Block b;
  uint64_t count = 0;
  if (!registry_lookup(block_address, &b) || b.type_tag) return false;
  if (!objects_in_block(b.address, b.size, p, elem_size, elem_align, &count)) return false;
  if (!registry_set_type(block_address, type_tag, true, &b)) return false;
  commit_pending(t);
  emit_retype(t, owner_thread(b.owner), owner_number(b.owner), type_tag, count, now_us());
  return true;
}

}  // namespace

void on_alloc(void* p, size_t size, uintptr_t call_site) {
  if (!runtime_active() || !g_recording.load(std::memory_order_relaxed)) return;
  ThreadScope scope(true);
  if (ThreadState* t = scope.get()) register_block(t, reinterpret_cast<uintptr_t>(p), size, call_site, 0, 0);
}

bool on_free_sized(void* p, size_t* size) {
  if (!runtime_active()) return false;
  ThreadScope scope(true);
  ThreadState* t = scope.get();
  if (!t) return false;
  Block b;
  if (!registry_remove(reinterpret_cast<uintptr_t>(p), &b)) {
    ++t->untracked_frees;
    return false;
  }
  commit_pending(t);
  emit_free(t, owner_thread(b.owner), owner_number(b.owner), now_us());
  *size = b.size;
  return true;
}

void on_free(void* p) {
  size_t size;
  on_free_sized(p, &size);
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
    Block b;
    registry_set_type(a.address, type_tag, false, &b);
    commit_pending(t);
    return;
  }
  // The constructor allocated in between, or this is placement new: look the
  // address up, as the block itself or behind an array cookie.
  size_t cookie = elem_align > sizeof(size_t) ? elem_align : sizeof(size_t);
  if (!retype_registered(t, p, p, type_tag, elem_size, elem_align) && p > cookie)
    retype_registered(t, p - cookie, p, type_tag, elem_size, elem_align);
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
    Block b;
    registry_set_type(p, type_tag, false, &b);
    commit_pending(t);
    return;
  }
  Block b;
  if (registry_set_type(p, type_tag, false, &b)) {
    commit_pending(t);
    emit_retype(t, owner_thread(b.owner), owner_number(b.owner), type_tag, count, now_us());
    return;
  }
  // Memory HeapType never saw (malloc, a pool): it becomes a tracked block, until
  // heaptype::untag() releases it.
  if (!g_recording.load(std::memory_order_relaxed)) return;
  register_block(t, p, static_cast<uint64_t>(elem_size) * count, call_site, type_tag, count);
  commit_pending(t);
}

void on_untag(const void* p) { on_free(const_cast<void*>(p)); }

}  // namespace runtime
}  // namespace heaptype
