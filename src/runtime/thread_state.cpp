#include "thread_state.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <initializer_list>

#include "block_header.hpp"
#include "clock.hpp"
#include "diagnostics.hpp"
#include "internal_memory.hpp"
#include "libc_next.hpp"
#include "mappings.hpp"
#include "profile_writer.hpp"
#include "tracker.hpp"

extern "C" void* __libc_stack_end;

namespace heaptype {
namespace runtime {

__thread ThreadState* tls_thread_state __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

using format::put_varint;

SpinLock g_list_lock;
ThreadState* g_all = nullptr;
ThreadState* g_free = nullptr;
std::atomic<uint32_t> g_next_number{1};
pthread_key_t g_exit_key;
bool g_key_ready = false;
void (*g_on_exit)(ThreadState*) = nullptr;

// --- site table ----------------------------------------------------------------------

inline uint64_t hash_site(const SiteKey& k) {
  const format::Site& s = k.site;
  uint64_t h = s.size * 0x9E3779B97F4A7C15ull;
  h ^= (s.type_tag + (h << 6) + (h >> 2)) * 0xC2B2AE3D27D4EB4Full;
  h ^= (s.call_site + (h << 6) + (h >> 2)) * 0x165667B19E3779F9ull;
  h ^= s.count * 0x27D4EB2F165667C5ull;
  h ^= (s.node ^ k.base) * 0x94D049BB133111EBull;
  return h ^ (h >> 31);
}

inline bool same_site(const SiteKey& a, const SiteKey& b) {
  return a.site.size == b.site.size && a.site.call_site == b.site.call_site &&
         a.site.type_tag == b.site.type_tag && a.site.count == b.site.count && a.site.node == b.site.node &&
         a.base == b.base;
}

// The index doubles at 3/4 full; its slots are made present (a hash spreads probes
// over all of them). The definitions grow apart from it, their pages moved (mremap),
// not copied: only the pages that hold definitions are ever touched, and each once.
bool grow_site_index(SiteTable& table) {
  size_t capacity = table.capacity ? table.capacity * 2 : 512;
  SiteSlot* slots = static_cast<SiteSlot*>(map_pages_present(capacity * sizeof(SiteSlot), MemoryUse::kSites));
  if (!slots) return false;
  for (size_t i = 0; i < table.capacity; ++i) {
    SiteSlot slot = table.slots[i];
    if (!slot.id_plus_one) continue;
    size_t j = hash_site(table.by_id[slot.id_plus_one - 1]) & (capacity - 1);
    while (slots[j].id_plus_one) j = (j + 1) & (capacity - 1);
    slots[j] = slot;
  }
  unmap_pages(table.slots, table.capacity * sizeof(SiteSlot), MemoryUse::kSites);
  table.slots = slots;
  table.capacity = capacity;
  return true;
}

bool grow_site_definitions(SiteTable& table) {
  size_t capacity = table.by_id_capacity ? table.by_id_capacity * 2 : 256;
  if (capacity > kSitesPerGeneration) capacity = kSitesPerGeneration;
  SiteKey* by_id = static_cast<SiteKey*>(
      grow_pages(table.by_id, table.by_id_capacity * sizeof(SiteKey), capacity * sizeof(SiteKey), MemoryUse::kSites));
  if (!by_id) return false;
  table.by_id = by_id;
  table.by_id_capacity = capacity;
  return true;
}

// A new generation of sites: the kept ones are forgotten, numbering goes on.
void start_site_generation(SiteTable& table) {
  table.first_site += static_cast<uint32_t>(table.used);
  table.used = 0;
  std::memset(table.slots, 0, table.capacity * sizeof(SiteSlot));
}

// --- the event buffer -------------------------------------------------------------------

// The thread's name: its own from prctl, another thread's from /proc.
size_t thread_name(const ThreadState* t, char (&name)[17]) {
  std::memset(name, 0, sizeof name);
  if (tls_thread_state == t) {
    prctl(PR_GET_NAME, name, 0, 0, 0);
    return std::strlen(name);
  }
  char path[64] = "/proc/self/task/";
  char digits[24];
  int n = decimal_text(t->os_tid, digits);
  size_t used = std::strlen(path);
  std::memcpy(path + used, digits, static_cast<size_t>(n));
  std::memcpy(path + used + n, "/comm", 6);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t got = read(fd, name, 16);
  close_own(fd);
  size_t length = got > 0 ? static_cast<size_t>(got) : 0;
  while (length && name[length - 1] == '\n') name[--length] = '\0';
  return length;
}

void write_thread_chunk(const ThreadState* t) {
  uint8_t payload[64];
  uint8_t* p = put_varint(payload, t->os_tid);
  char name[17];
  size_t length = thread_name(t, name);
  std::memcpy(p, name, length);
  writer_chunk(format::ChunkKind::kThread, t->number, payload, static_cast<size_t>(p - payload) + length);
}

// Writes out [from, to) of `buffer`; the flush lock is held.
void write_region(ThreadState* t, const uint8_t* buffer, size_t from, size_t to) {
  if (to <= from) return;
  if (!t->announced) {
    write_thread_chunk(t);
    t->announced = true;
  }
  writer_chunk(format::ChunkKind::kEvents, t->number, buffer + from, to - from);
}

// The buffer handed over, written out and kept as the spare; the flush lock is held.
void write_handed(ThreadState* t) {
  if (!t->handed) return;
  write_region(t, t->handed, t->handed_from, t->handed_to);
  t->spare = t->handed;
  t->handed = nullptr;
}

// Writes out [from, to) of the current buffer, after what was handed over.
void write_out(ThreadState* t, size_t from, size_t to) {
  write_handed(t);
  write_region(t, t->buffer, from, to);
}

// The current buffer, reset to empty; the flush lock is held.
void start_buffer_again(ThreadState* t) {
  t->used = t->flushed = 0;
  t->committed.store(0, std::memory_order_release);
}

// The full buffer goes to the ticker and the spare takes its place, when the ticker
// has written the last one (else the owner writes both itself: the file keeps up).
bool hand_over(ThreadState* t) {
  if (g_finished || t->handed || t->used <= t->flushed || !clock_running()) return false;
  if (!t->spare && !(t->spare = static_cast<uint8_t*>(map_pages(kEventBufferSize, MemoryUse::kEvents))))
    return false;
  t->handed = t->buffer;
  t->handed_from = t->flushed;
  t->handed_to = t->used;
  t->buffer = t->spare;
  t->spare = nullptr;
  start_buffer_again(t);
  request_tick_work();
  return true;
}

void write_handed_one(ThreadState* t, void*) { write_handed(t); }

}  // namespace

void flush_own(ThreadState* t) {
  LockGuard guard(t->flush_lock);
  if (hand_over(t)) return;
  write_out(t, t->flushed, t->used);
  start_buffer_again(t);
}

void flush_own_now(ThreadState* t) {
  LockGuard guard(t->flush_lock);
  write_out(t, t->flushed, t->used);
  start_buffer_again(t);
}

void write_handed_buffers() { for_each_thread_state(write_handed_one, nullptr); }

namespace {

// A CONTROL record: its head, then its operands.
void emit_control(ThreadState* t, format::ControlOp op, std::initializer_list<uint64_t> operands) {
  reserve_record(t);
  // A cursor of its own: the bytes written may alias anything, so a position kept in
  // `t` was stored and loaded again around each of them (a NODE record cost 131
  // instructions on yaml-cpp's tests, one per new call-path node).
  uint8_t* out = format::put_varint(t->buffer + t->used, format::control_record_head(op));
  for (uint64_t operand : operands) out = format::put_varint(out, operand);
  t->used = static_cast<size_t>(out - t->buffer);
}

// The number of a site key, defining it (SITE or DERIVED_SITE record) on first use.
uint32_t site_key_number(ThreadState* t, const SiteKey& key) {
  SiteTable& table = t->sites;
  if (table.used == kSitesPerGeneration) {
    start_site_generation(table);
    forget_memo(t->call_sites);
    if (aggregating()) aggregate_forget_sites(t, table.first_site);
  }
  if ((table.used + 1) * 4 > table.capacity * 3 && !grow_site_index(table)) return 0;
  if (table.used == table.by_id_capacity && !grow_site_definitions(table)) return 0;
  size_t mask = table.capacity - 1;
  uint64_t hash = hash_site(key);
  uint32_t hash_high = static_cast<uint32_t>(hash >> 32);
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    SiteSlot& slot = table.slots[i];
    if (slot.id_plus_one) {
      uint32_t id = slot.id_plus_one - 1;
      if (slot.hash_high == hash_high && same_site(table.by_id[id], key)) return table.first_site + id;
      continue;
    }
    uint32_t id = static_cast<uint32_t>(table.used++);
    slot = {id + 1, hash_high};
    table.by_id[id] = key;
    const format::Site& s = key.site;
    if (key.base)
      emit_control(t, format::ControlOp::kDerivedSite,
                   {owner_thread(key.base - 1), owner_site(key.base - 1), s.type_tag, s.count});
    else
      emit_control(t, format::ControlOp::kSite,
                   {s.size, s.count, format::delta_from(&t->deltas.type, s.type_tag),
                    format::delta_from(&t->deltas.code, s.call_site), t->newest_node - s.node});
    t->newest_site = table.first_site + id;
    return t->newest_site;
  }
}

void find_stack(ThreadState* t) {
  // The main thread's frames lie below the stack pointer _start was given; another
  // thread's below its thread descriptor, which glibc puts at the top of its stack.
  bool main_thread = t->os_tid == static_cast<uint64_t>(getpid());
  t->stack.high = main_thread ? reinterpret_cast<uintptr_t>(__libc_stack_end)
                              : static_cast<uintptr_t>(pthread_self());
  t->stack.low = 0;  // until find_stack_low: the depth counts every frame, as it always did
  t->stack.walk_low = UINTPTR_MAX;
  t->stack.low_known = false;
}


// A fresh stream; the flush lock is held (or the state is not yet shared). `keep_totals`:
// a state an exited thread left keeps its counters, which the END chunk sums.
void reset_stream(ThreadState* t, uint32_t number, bool keep_totals) {
  t->number = number;
  t->owner_base = make_owner(number, 0, false);
  t->os_tid = static_cast<uint64_t>(syscall(SYS_gettid));
  t->busy = false;
  t->pending_count = 0;
  t->exited = false;
  t->announced = false;
  t->used = t->flushed = 0;
  t->committed.store(0, std::memory_order_relaxed);
  // A buffer handed over and not written belongs to the stream that ends here (a forked
  // child's is its parent's, which the parent writes): it becomes the spare.
  if (t->handed) {
    if (t->spare)
      unmap_pages(t->handed, kEventBufferSize, MemoryUse::kEvents);
    else
      t->spare = t->handed;
    t->handed = nullptr;
  }
  t->last_address = 0;
  t->last_alloc.address = 0;
  t->newest_site = t->newest_node = 0;
  t->deltas = format::StreamDeltas{};
  t->hint_block = 0;
  t->last_time = 0;
  t->stack_deepest = UINTPTR_MAX;
  t->stack_reported = 0;
  if (t->sites.capacity) std::memset(t->sites.slots, 0, t->sites.capacity * sizeof(SiteSlot));
  t->sites.used = 0;
  t->sites.first_site = 0;
  t->probation_count = 0;
  t->inexact_count = 0;
  if (!keep_totals) {
    t->allocations.store(0, std::memory_order_relaxed);
    t->frees.store(0, std::memory_order_relaxed);
    t->untracked_frees.store(0, std::memory_order_relaxed);
    t->other_header_bytes.store(0, std::memory_order_relaxed);
  }
  reset_call_site_types(t->call_sites);
  reset_call_context(t);
}

ThreadState* new_state() {
  uint32_t number = g_next_number.fetch_add(1);
  if (number > kMaxThreadNumber) return nullptr;  // the owner word has no room: untracked
  {
    LockGuard guard(g_list_lock);
    if (ThreadState* reused = g_free) {
      g_free = reused->next_free;
      reused->next_free = nullptr;
      LockGuard state_guard(reused->flush_lock);
      reset_stream(reused, number, true);  // the END chunk's counts are the process's: an exited thread's stay
      return reused;
    }
  }
  ThreadState* t = static_cast<ThreadState*>(map_pages(sizeof(ThreadState), MemoryUse::kEvents));
  if (!t) return nullptr;
  t->buffer = static_cast<uint8_t*>(map_pages(kEventBufferSize, MemoryUse::kEvents));
  if (!t->buffer || !init_call_site_types(t->call_sites)) {
    unmap_pages(t->buffer, kEventBufferSize, MemoryUse::kEvents);
    unmap_pages(t, sizeof(ThreadState), MemoryUse::kEvents);
    return nullptr;
  }
  reset_stream(t, number, false);
  LockGuard guard(g_list_lock);
  t->next = g_all;
  g_all = t;
  return t;
}

void retire(ThreadState* t) {
  t->exited = true;
  t->next_free = g_free;
  g_free = t;
}

// pthread key destructor: the thread is exiting; its events must not wait for exit().
void on_thread_exit(void* state) {
  ThreadState* t = static_cast<ThreadState*>(state);
  if (g_on_exit) g_on_exit(t);
  if (aggregating()) aggregate_thread_ended(t);
  report_stack_depth(t);
  flush_own_now(t);
  tls_thread_state = nullptr;
  LockGuard guard(g_list_lock);
  retire(t);
}

}  // namespace

void find_stack_low(ThreadState* t) {
  uintptr_t high = t->stack.high, start = 0, end = 0;
  t->stack.low_known = true;
  t->stack.low = t->stack.walk_low = high;  // nothing known: no frame is taken for this stack's
  if (!high) return;
  bool main_thread = t->os_tid == static_cast<uint64_t>(getpid());
  struct rlimit limit;
  if (main_thread && getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      limit.rlim_cur < high) {
    // The kernel keeps the main stack's limit below its top for the stack alone (mmap's
    // base lies under it), and grows the stack down to any address there.
    t->stack.low = t->stack.walk_low = high - limit.rlim_cur;
    return;
  }
  // Another thread's stack is one mapping (its guard page another), the main thread's
  // as deep as it has grown (deeper frames then get the unwinder's walk).
  if (readable_mapping_of(high - 1, &start, &end) && start < high) t->stack.low = t->stack.walk_low = start;
}

ThreadState* create_thread_state() {
  ThreadState* t = new_state();
  if (!t) return nullptr;
  find_stack(t);
  tls_thread_state = t;
  if (g_key_ready) pthread_setspecific(g_exit_key, t);
  return t;
}

void thread_states_init(void (*on_exit)(ThreadState*)) {
  g_on_exit = on_exit;
  if (!g_key_ready) g_key_ready = pthread_key_create(&g_exit_key, on_thread_exit) == 0;
}

void for_each_thread_state(void (*visit)(ThreadState*, void*), void* context) {
  LockGuard guard(g_list_lock);
  for (ThreadState* t = g_all; t; t = t->next) {
    LockGuard state_guard(t->flush_lock);
    visit(t, context);
  }
}

void collect_events(ThreadState* t) {
  size_t end = t->committed.load(std::memory_order_acquire);
  write_out(t, t->flushed, end);
  if (end > t->flushed) t->flushed = end;
}

uint32_t site_number(ThreadState* t, const format::Site& site) { return site_key_number(t, {site, 0}); }

// Starting the ticker allocates (its thread's TLS): those blocks are the runtime's
// (`busy` and `own_call`: not counted, not pending).
void start_ticker_if_due(ThreadState* t) {
  bool due = false;
  tick_without_ticker(&due);
  // Not in a vfork() child: a thread started there would die with its exec, and the
  // parent, sharing this memory, would take it for its own ticker.
  if (!due || !owns_this_process()) return;
  t->busy = t->own_call = true;
  start_deferred_ticker();
  t->busy = t->own_call = false;
}

uint32_t derived_site_number(ThreadState* t, uint32_t thread, uint32_t site, uintptr_t type_tag, uint64_t count) {
  SiteKey key = {{0, count, type_tag, 0, 0}, (static_cast<uint64_t>(thread) << 32 | site) + 1};
  return site_key_number(t, key);
}

const SiteKey* site_definition(const ThreadState* t, uint32_t site) {
  uint32_t i = site - t->sites.first_site;  // wraps around for forgotten numbers
  return i < t->sites.used ? &t->sites.by_id[i] : nullptr;
}

// The tick ends: a STACK record says how deep the stack went in it, when that changed.
void report_stack_depth(ThreadState* t) {
  if (!t->stack.low_known) find_stack_low(t);
  if (!t->stack.high || t->stack_deepest == UINTPTR_MAX || t->stack_deepest > t->stack.high ||
      t->stack_deepest < t->stack.low) {
    t->stack_deepest = UINTPTR_MAX;  // a frame on another stack (a coroutine's) before the bounds were known
    return;
  }
  uint64_t bytes = t->stack.high - t->stack_deepest;
  t->stack_deepest = UINTPTR_MAX;
  if (bytes == t->stack_reported) return;
  emit_control(t, format::ControlOp::kStack, {bytes});
  t->stack_reported = bytes;
}

void report_last_stack_depth(ThreadState* t) {
  if (t->busy) return;
  t->busy = true;
  report_stack_depth(t);
  t->busy = false;
  end_event(t);  // a record that is not committed is not collected by the final flush
}

void emit_time_record(ThreadState* t, uint64_t time) {
  report_stack_depth(t);
  emit_control(t, format::ControlOp::kTime, {time - t->last_time});
  t->last_time = time;
}

void emit_remote_free(ThreadState* t, uint64_t owner, uintptr_t address, uint64_t time) {
  if (aggregating()) return aggregate_free(t, owner_thread(owner), owner_site(owner));
  reserve_record(t);
  stamp(t, time);
  emit_control(t, format::ControlOp::kFreeRemote, {owner_thread(owner), owner_site(owner)});
  put_address(t, address);
  bump(t->frees, 1);
}

void emit_move(ThreadState* t, uint64_t owner, uint32_t new_site, uintptr_t address, uint64_t time) {
  if (aggregating()) return aggregate_move(t, owner_thread(owner), owner_site(owner), new_site);
  reserve_record(t);
  stamp(t, time);
  emit_control(t, format::ControlOp::kMove, {owner_thread(owner), owner_site(owner), new_site});
  put_address(t, address);
  // A reader takes a move of (this thread, the last ALLOC's site) as a move of the
  // last allocated block (format: FREE_LAST): it stays open only when it is that block.
  LastAlloc& last = t->last_alloc;
  bool names_last_site = owner_thread(owner) == t->number && owner_site(owner) == last.site;
  if (names_last_site && last.address == address)
    last.site = new_site;
  else if (names_last_site || last.address == address)
    last.address = 0;
}

void emit_node(ThreadState* t, uint32_t id, uint32_t parent, uintptr_t function, uintptr_t call_site) {
  emit_control(t, format::ControlOp::kNode,
               {id - parent, format::delta_from(&t->deltas.function, function),
                format::delta_from(&t->deltas.code, call_site)});
  t->newest_node = id;
}

void thread_states_lock_all() {
  g_list_lock.lock();
  for (ThreadState* t = g_all; t; t = t->next) t->flush_lock.lock();
}

void thread_states_unlock_all() {
  for (ThreadState* t = g_all; t; t = t->next) t->flush_lock.unlock();
  g_list_lock.unlock();
}

void thread_states_reset_in_child() {
  // Only the forking thread lives on. Its buffered events belong to the parent's
  // profile (which the parent will write): the child starts an empty stream.
  g_next_number.store(1);
  g_free = nullptr;
  ThreadState* self = tls_thread_state;
  for (ThreadState* t = g_all; t; t = t->next)
    if (t != self) retire(t);
  if (self) {
    uint32_t depth = self->context.depth;  // the child is still inside these calls
    reset_stream(self, g_next_number.fetch_add(1), false);
    self->context.depth = depth;
    rebuild_call_context_after_fork(self);
  }
  for (ThreadState* t = g_all; t; t = t->next) t->flush_lock.unlock();
  g_list_lock.unlock();
}

}  // namespace runtime
}  // namespace heaptype
