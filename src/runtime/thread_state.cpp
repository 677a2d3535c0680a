#include "thread_state.hpp"

#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <initializer_list>

#include "internal_memory.hpp"
#include "profile_writer.hpp"
#include "registry.hpp"

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

bool grow_sites(SiteTable& table) {
  size_t capacity = table.capacity ? table.capacity * 2 : 256;
  SiteSlot* slots = static_cast<SiteSlot*>(map_pages(capacity * sizeof(SiteSlot)));
  SiteKey* by_id = static_cast<SiteKey*>(map_pages(capacity * sizeof(SiteKey)));
  if (!slots || !by_id) {
    unmap_pages(slots, capacity * sizeof(SiteSlot));
    unmap_pages(by_id, capacity * sizeof(SiteKey));
    return false;
  }
  for (size_t i = 0; i < table.capacity; ++i) {
    if (!table.slots[i].used) continue;
    size_t j = hash_site(table.slots[i].key) & (capacity - 1);
    while (slots[j].used) j = (j + 1) & (capacity - 1);
    slots[j] = table.slots[i];
  }
  if (table.used) std::memcpy(by_id, table.by_id, table.used * sizeof(SiteKey));
  unmap_pages(table.slots, table.capacity * sizeof(SiteSlot));
  unmap_pages(table.by_id, table.capacity * sizeof(SiteKey));
  table.slots = slots;
  table.by_id = by_id;
  table.capacity = capacity;
  return true;
}

inline uint8_t* tail(ThreadState* t) { return t->buffer + t->used; }

// Guarantees room for one record, flushing the buffer if needed.
inline void reserve_record(ThreadState* t) {
  if (t->used + kMaxRecordSize > kEventBufferSize) flush_events(t);
}

// A CONTROL record: its head, then its operands.
void emit_control(ThreadState* t, format::ControlOp op, std::initializer_list<uint64_t> operands) {
  reserve_record(t);
  uint8_t* p = put_varint(tail(t), format::control_record_head(op));
  for (uint64_t operand : operands) p = put_varint(p, operand);
  t->used = static_cast<size_t>(p - t->buffer);
}

void emit_varint(ThreadState* t, uint64_t v) {
  t->used = static_cast<size_t>(put_varint(tail(t), v) - t->buffer);
}

// Address mode: the block's address after ALLOC, FREE, FREE_REMOTE and MOVE.
inline void emit_address(ThreadState* t, uintptr_t address) {
  if (writer_addresses()) emit_varint(t, format::encode_address_delta(address, t->last_address));
}

// The number of a site key, defining it (SITE or DERIVED_SITE record) on first use.
uint32_t site_key_number(ThreadState* t, const SiteKey& key) {
  SiteTable& table = t->sites;
  if ((table.used + 1) * 4 > table.capacity * 3 && !grow_sites(table)) return 0;
  size_t mask = table.capacity - 1;
  for (size_t i = hash_site(key) & mask;; i = (i + 1) & mask) {
    SiteSlot& slot = table.slots[i];
    if (slot.used && same_site(slot.key, key)) return slot.id;
    if (slot.used) continue;
    slot.key = key;
    slot.used = 1;
    slot.id = static_cast<uint32_t>(table.used++);
    table.by_id[slot.id] = key;
    const format::Site& s = key.site;
    if (key.base)
      emit_control(t, format::ControlOp::kDerivedSite,
                   {owner_thread(key.base - 1), owner_site(key.base - 1), s.type_tag, s.count});
    else
      emit_control(t, format::ControlOp::kSite, {s.size, s.count, s.type_tag, s.call_site, s.node});
    return slot.id;
  }
}

inline void emit_time(ThreadState* t, uint64_t time_us) {
  if (time_us <= t->last_time_us) return;
  emit_control(t, format::ControlOp::kTime, {time_us - t->last_time_us});
  t->last_time_us = time_us;
}

void write_thread_chunk(ThreadState* t) {
  uint8_t payload[64];
  uint8_t* p = put_varint(payload, static_cast<uint64_t>(syscall(SYS_gettid)));
  char name[17] = {0};
  prctl(PR_GET_NAME, name, 0, 0, 0);
  size_t length = std::strlen(name);
  std::memcpy(p, name, length);
  writer_chunk(format::ChunkKind::kThread, t->number,
               payload, static_cast<size_t>(p - payload) + length);
}

void reset_stream(ThreadState* t, uint32_t number) {
  t->number = number;
  t->exited = false;
  t->announced = false;
  t->used = 0;
  t->last_address = 0;
  t->last_alloc.open = false;
  t->last_time_us = 0;
  if (t->sites.capacity) std::memset(t->sites.slots, 0, t->sites.capacity * sizeof(SiteSlot));
  t->sites.used = 0;
  t->pending.valid = false;
  t->allocations = t->frees = t->untracked_frees = 0;
  reset_call_context(t);
}

ThreadState* new_state() {
  {
    LockGuard guard(g_list_lock);
    if (ThreadState* reused = g_free) {
      g_free = reused->next_free;
      reused->next_free = nullptr;
      reset_stream(reused, g_next_number.fetch_add(1));
      return reused;
    }
  }
  ThreadState* t = static_cast<ThreadState*>(map_pages(sizeof(ThreadState)));
  if (!t) return nullptr;
  t->buffer = static_cast<uint8_t*>(map_pages(kEventBufferSize));
  if (!t->buffer) {
    unmap_pages(t, sizeof(ThreadState));
    return nullptr;
  }
  reset_stream(t, g_next_number.fetch_add(1));
  LockGuard guard(g_list_lock);
  t->next = g_all;
  g_all = t;
  return t;
}

// pthread key destructor: the thread is exiting; its events must not wait for exit().
void on_thread_exit(void* state) {
  ThreadState* t = static_cast<ThreadState*>(state);
  t->lock.lock();
  commit_pending(t);
  flush_events(t);
  t->exited = true;
  t->lock.unlock();
  tls_thread_state = nullptr;
  LockGuard guard(g_list_lock);
  t->next_free = g_free;
  g_free = t;
}

}  // namespace

ThreadState* create_thread_state() {
  ThreadState* t = new_state();
  if (!t) return nullptr;
  tls_thread_state = t;
  if (g_key_ready) pthread_setspecific(g_exit_key, t);
  return t;
}

void thread_states_init() {
  if (!g_key_ready) g_key_ready = pthread_key_create(&g_exit_key, on_thread_exit) == 0;
}

void for_each_thread_state(void (*visit)(ThreadState*, void*), void* context) {
  LockGuard guard(g_list_lock);
  for (ThreadState* t = g_all; t; t = t->next) {
    LockGuard state_guard(t->lock);
    visit(t, context);
  }
}

uint32_t site_number(ThreadState* t, const format::Site& site) { return site_key_number(t, {site, 0}); }

uint32_t derived_site_number(ThreadState* t, uint32_t thread, uint32_t site, uintptr_t type_tag, uint64_t count) {
  SiteKey key = {{0, count, type_tag, 0, 0}, make_owner(thread, site) + 1};
  return site_key_number(t, key);
}

const SiteKey* site_definition(const ThreadState* t, uint32_t site) {
  return site < t->sites.used ? &t->sites.by_id[site] : nullptr;
}

void commit_pending(ThreadState* t) {
  if (!t->pending.valid) return;
  PendingAlloc& a = t->pending;
  a.valid = false;
  uint32_t site = a.site;
  if (a.type_tag) {
    // Typed after its owner word was written: the word names the typed site now.
    site = site_number(t, {a.size, a.count, a.type_tag, a.call_site, a.node});
    registry_insert(a.address, make_owner(t->number, site));
  }
  reserve_record(t);
  emit_time(t, a.time_us);
  emit_varint(t, format::alloc_record_head(site));
  emit_address(t, a.address);
  t->last_address = a.address;
  t->last_alloc = {a.address, site, true};
  ++t->allocations;
}

void emit_free(ThreadState* t, uint64_t owner, uintptr_t address, uint64_t time_us) {
  reserve_record(t);
  emit_time(t, time_us);
  uint32_t thread = owner_thread(owner), site = owner_site(owner);
  LastAlloc& last = t->last_alloc;
  if (thread != t->number) {
    emit_control(t, format::ControlOp::kFreeRemote, {thread, site});
    emit_address(t, address);
  } else if (last.open && last.address == address && last.site == site) {
    emit_varint(t, format::control_record_head(format::ControlOp::kFreeLast));
    last.open = false;
  } else {
    emit_varint(t, format::free_record_head(site));
    emit_address(t, address);
  }
  ++t->frees;
}

void emit_move(ThreadState* t, uint64_t owner, uint32_t new_site, uintptr_t address, uint64_t time_us) {
  reserve_record(t);
  emit_time(t, time_us);
  emit_control(t, format::ControlOp::kMove, {owner_thread(owner), owner_site(owner), new_site});
  emit_address(t, address);
  // A FREE_LAST names the site of the last ALLOC record: not this block's any more.
  if (t->last_alloc.address == address) t->last_alloc.open = false;
}

void emit_node(ThreadState* t, uint32_t parent, uintptr_t function, uintptr_t call_site) {
  emit_control(t, format::ControlOp::kNode, {parent, function, call_site});
}

void flush_events(ThreadState* t) {
  if (!t->used) return;
  if (!t->announced) {
    write_thread_chunk(t);
    t->announced = true;
  }
  writer_chunk(format::ChunkKind::kEvents, t->number, t->buffer, t->used);
  t->used = 0;
}

void thread_states_lock_all() {
  g_list_lock.lock();
  for (ThreadState* t = g_all; t; t = t->next) t->lock.lock();
}

void thread_states_unlock_all() {
  for (ThreadState* t = g_all; t; t = t->next) t->lock.unlock();
  g_list_lock.unlock();
}

void thread_states_reset_in_child() {
  // Only the forking thread lives on. Its buffered events belong to the parent's
  // profile (which the parent will write): the child starts an empty stream.
  g_next_number.store(1);
  g_free = nullptr;
  ThreadState* self = tls_thread_state;
  for (ThreadState* t = g_all; t; t = t->next) {
    if (t != self) {
      t->exited = true;
      t->used = 0;
      t->pending.valid = false;
    }
  }
  if (self) {
    uint32_t depth = self->context.depth;  // the child is still inside these calls
    reset_stream(self, g_next_number.fetch_add(1));
    self->context.depth = depth;
    rebuild_call_context_after_fork(self);
  }
  for (ThreadState* t = g_all; t; t = t->next) t->lock.unlock();
  g_list_lock.unlock();
}

}  // namespace runtime
}  // namespace heaptype
