#include "aggregate.hpp"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "../format/profile_format.hpp"
#include "block_header.hpp"
#include "clock.hpp"
#include "diagnostics.hpp"
#include "internal_memory.hpp"
#include "profile_writer.hpp"
#include "spinlock.hpp"
#include "thread_state.hpp"

namespace heaptype {
namespace runtime {

bool g_aggregating = false;

namespace {

using format::put_varint;

// The counts of one (thread, site).
struct SiteTally {
  uint64_t allocations;
  uint64_t temporaries;
  uint64_t size;            // bytes per block (the site's, or its base site's)
  uint64_t peak_index;      // the confirmed peak this site last changed after
  uint32_t live;            // blocks live now
  uint32_t live_at_peak;    // ... at the confirmed peak `peak_index` (when it changed since)
  uint32_t type;            // slot in the type table + 1 (0: untyped)
  bool known;               // size and type are set (on the site's first event)
};

// A type's own peak: the most bytes of it live at once, and when first reached.
struct TypeTally {
  uint64_t tag;
  uint64_t live_bytes;
  uint64_t peak_bytes;
  uint64_t peak_time;
};

// A thread's tallies: a window of its site numbers (which only grow), from `base`.
// A thread forgets its sites a generation at a time (thread_state.hpp) and counts a
// site met again under a new number: the sites below `horizon` are never counted
// again. retire_sites() writes those with no live block once, as final (RETIRED
// chunks), moves those with live blocks to the survivors and moves `base` up: memory
// stays with the sites of the generation in use, not with every site ever met.
struct ThreadTallies {
  SiteTally* sites;  // sites[i] counts site base + i
  size_t capacity;
  size_t used;       // 1 + the highest site counted - base
  uint32_t base;
  uint32_t horizon;  // the thread's first site of its generation in use (kEnded: none)
};
// The horizon of a thread that ended: all its sites are forgotten, its window unmapped.
constexpr uint32_t kEnded = UINT32_MAX;

// A tally of a forgotten site that still has live blocks, by (thread, site).
struct Survivor {
  uint64_t key;  // thread << 32 | site; 0: an empty slot (threads count from 1)
  SiteTally tally;
};

// The heap as a whole, and the last allocation for the temporary rule.
struct Heap {
  uint64_t bytes;
  uint64_t blocks;
  uint64_t peak_bytes;       // confirmed
  uint64_t peak_time;
  uint64_t peak_index;       // confirmed peaks so far
  uint64_t rising_time;      // when `bytes` last went above `peak_bytes`
  uint64_t peak_blocks;      // the most blocks live at once
  bool last_open;            // heaptrack's rule: the last event was an allocation at
  uint32_t last_thread;      // (last_thread, last_site)
  uint32_t last_site;
  // Counts taken under the lock, and those that found it held by another thread: how
  // much the program's threads wait for each other here (on the lines the count writes).
  uint64_t locked_counts;
  uint64_t waited_counts;
};

SpinLock g_lock;
// The thread that counts without the lock while it is the only one (see aggregate.hpp).
std::atomic<bool> g_shared{true};       // false only while the owner may skip the lock
std::atomic<uint32_t> g_owner{0};       // its thread number (0: not claimed yet)
std::atomic<ThreadState*> g_owner_state{nullptr};
Heap g_heap;
ThreadTallies* g_threads = nullptr;  // by thread number
size_t g_threads_capacity = 0;
// Types in the order first counted: a site's tally names its type by its place here,
// which never changes (a rehash moves the index's entries, not the types).
TypeTally* g_types = nullptr;
size_t g_types_capacity = 0;
size_t g_types_used = 0;
uint32_t* g_type_index = nullptr;    // open addressing by tag: place in g_types + 1 (0: empty)
size_t g_type_index_capacity = 0;    // a power of two, at least twice the types
// Survivors: open addressing by key, at most 3/4 full; a free that empties one
// leaves it for the next retire_sites(), which writes it as final and removes it.
Survivor* g_survivors = nullptr;
size_t g_survivors_capacity = 0;     // a power of two
size_t g_survivors_used = 0;
// A thread forgot a generation of sites, or a survivor lost its last block: the ticker
// retires them (set by the counting threads, read by the ticker).
std::atomic<bool> g_retire_due{false};

template <class T>
bool grow(T** array, size_t* capacity, size_t needed, size_t first, MemoryUse use = MemoryUse::kSites) {
  if (needed <= *capacity) return true;
  size_t bigger = *capacity ? *capacity : first;
  while (bigger < needed) bigger *= 2;
  T* fresh = static_cast<T*>(grow_pages(*array, *capacity * sizeof(T), bigger * sizeof(T), use));
  if (!fresh) return false;
  *array = fresh;
  *capacity = bigger;
  return true;
}

ThreadTallies* thread_tallies(uint32_t thread) {
  if (!grow(&g_threads, &g_threads_capacity, size_t{thread} + 1, 16)) return nullptr;
  return &g_threads[thread];
}

inline uint64_t hash_tag(uint64_t tag) { return (tag * 0x9E3779B97F4A7C15ull) >> 20; }

// The index slot of `tag` in an index of `capacity` (a power of two): its own, or the
// empty one where it goes.
size_t type_probe(const uint32_t* index, size_t capacity, uint64_t tag) {
  size_t i = hash_tag(tag) & (capacity - 1);
  while (index[i] && g_types[index[i] - 1].tag != tag) i = (i + 1) & (capacity - 1);
  return i;
}

// Room for one more type: the list grows in place or moves (its places stay), the index
// is built again at twice the size (touched all over: present at once, as
// call_site_types' is).
bool grow_types() {
  if (g_types_used == g_types_capacity &&
      !grow(&g_types, &g_types_capacity, g_types_used + 1, 128, MemoryUse::kTypes))
    return false;
  if ((g_types_used + 1) * 2 <= g_type_index_capacity) return true;
  size_t capacity = g_type_index_capacity ? g_type_index_capacity * 2 : 256;
  size_t bytes = capacity * sizeof(uint32_t);
  uint32_t* fresh = static_cast<uint32_t*>(g_type_index_capacity ? map_pages_present(bytes, MemoryUse::kTypes)
                                                                  : map_pages(bytes, MemoryUse::kTypes));
  if (!fresh) return false;
  if (g_type_index) unmap_pages(g_type_index, g_type_index_capacity * sizeof(uint32_t), MemoryUse::kTypes);
  g_type_index = fresh;
  g_type_index_capacity = capacity;
  for (size_t place = 0; place < g_types_used; ++place)
    g_type_index[type_probe(g_type_index, capacity, g_types[place].tag)] = static_cast<uint32_t>(place + 1);
  return true;
}

// The type's place in g_types + 1 (0: untyped, or no memory for it).
uint32_t type_slot(uint64_t tag) {
  if (!tag) return 0;
  if (g_type_index_capacity) {
    size_t i = type_probe(g_type_index, g_type_index_capacity, tag);
    if (g_type_index[i]) return g_type_index[i];
  }
  if (!grow_types()) return 0;
  g_types[g_types_used] = {tag, 0, 0, 0};
  uint32_t place = static_cast<uint32_t>(++g_types_used);
  g_type_index[type_probe(g_type_index, g_type_index_capacity, tag)] = place;
  return place;
}

inline uint64_t survivor_key(uint32_t thread, uint32_t site) { return uint64_t{thread} << 32 | site; }
inline size_t survivor_home(uint64_t key) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 24); }

// The survivor slot of `key`: its own, or the empty one where it goes.
size_t survivor_probe(uint64_t key) {
  size_t mask = g_survivors_capacity - 1;
  size_t i = survivor_home(key) & mask;
  while (g_survivors[i].key && g_survivors[i].key != key) i = (i + 1) & mask;
  return i;
}

SiteTally* find_survivor(uint32_t thread, uint32_t site) {
  if (!g_survivors_used) return nullptr;
  Survivor& slot = g_survivors[survivor_probe(survivor_key(thread, site))];
  return slot.key ? &slot.tally : nullptr;
}

// Room for one more survivor: the table is built again at twice the size.
bool grow_survivors() {
  if ((g_survivors_used + 1) * 4 <= g_survivors_capacity * 3) return true;
  size_t old_capacity = g_survivors_capacity;
  Survivor* old = g_survivors;
  size_t capacity = old_capacity ? old_capacity * 2 : 1024;
  Survivor* fresh = static_cast<Survivor*>(map_pages(capacity * sizeof(Survivor), MemoryUse::kSites));
  if (!fresh) return false;
  g_survivors = fresh;
  g_survivors_capacity = capacity;
  for (size_t i = 0; i < old_capacity; ++i)
    if (old[i].key) g_survivors[survivor_probe(old[i].key)] = old[i];
  if (old) unmap_pages(old, old_capacity * sizeof(Survivor), MemoryUse::kSites);
  return true;
}

// Keeps a forgotten site's tally; false without memory for it (its blocks' frees then
// find no tally and are not counted, as for a site counted without memory).
bool add_survivor(uint32_t thread, uint32_t site, const SiteTally& tally) {
  if (!grow_survivors()) return false;
  uint64_t key = survivor_key(thread, site);
  g_survivors[survivor_probe(key)] = {key, tally};
  ++g_survivors_used;
  return true;
}

// Removes slot `i`, moving later slots of its probe run back (no tombstones).
void remove_survivor(size_t i) {
  size_t mask = g_survivors_capacity - 1;
  size_t hole = i;
  for (size_t j = (i + 1) & mask; g_survivors[j].key; j = (j + 1) & mask) {
    size_t home = survivor_home(g_survivors[j].key) & mask;
    // Slot j may fill the hole when its home is not cyclically within (hole, j].
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    g_survivors[hole] = g_survivors[j];
    hole = j;
  }
  g_survivors[hole].key = 0;
  --g_survivors_used;
}

// The tally of an existing (thread, site); nullptr when it was never counted.
SiteTally* find_tally(uint32_t thread, uint32_t site) {
  if (thread >= g_threads_capacity) return nullptr;
  const ThreadTallies& own = g_threads[thread];
  if (site < own.base) return find_survivor(thread, site);
  return site - own.base < own.used ? &own.sites[site - own.base] : nullptr;
}

// The size and type a site's blocks have: from its definition (a derived site's size
// is its base site's, whose blocks were counted before it could be derived).
void learn_site(ThreadState* t, uint32_t site, SiteTally* tally) {
  const SiteKey* def = site_definition(t, site);
  if (!def) return;  // out of memory when it was defined: counted without size or type
  tally->size = def->site.size;
  if (def->base) {
    if (const SiteTally* base = find_tally(owner_thread(def->base - 1), owner_site(def->base - 1)))
      tally->size = base->size;
  }
  tally->type = type_slot(def->site.type_tag);
  tally->known = true;
}

SiteTally* new_own_tally(ThreadState* t, uint32_t site);

// The tally of this thread's `site`, made on its first event.
__attribute__((always_inline)) inline SiteTally* own_tally(ThreadState* t, uint32_t site) {
  if (__builtin_expect(t->number < g_threads_capacity, 1)) {
    ThreadTallies& own = g_threads[t->number];
    uint32_t i = site - own.base;  // a thread counts its own sites at or above its base
    if (__builtin_expect(i < own.used && own.sites[i].known, 1)) return &own.sites[i];
  }
  return new_own_tally(t, site);
}

SiteTally* new_own_tally(ThreadState* t, uint32_t site) {
  ThreadTallies* own = thread_tallies(t->number);
  if (!own || site < own->base) return nullptr;
  size_t i = site - own->base;
  if (!grow(&own->sites, &own->capacity, i + 1, 1024)) return nullptr;
  if (i >= own->used) own->used = i + 1;
  SiteTally* tally = &own->sites[i];
  if (!tally->known) {
    tally->peak_index = g_heap.peak_index;
    learn_site(t, site, tally);
  }
  return tally;
}

// The heap's largest size so far becomes the peak: something other than an
// allocation comes next.
inline void confirm_peak() {
  if (g_heap.bytes <= g_heap.peak_bytes) return;
  g_heap.peak_bytes = g_heap.bytes;
  g_heap.peak_time = g_heap.rising_time;
  ++g_heap.peak_index;
}

// Before a site's count changes: its count at the last confirmed peak, if it has not
// changed since that peak (then its current count is that count).
inline void touch(SiteTally* tally) {
  if (tally->peak_index == g_heap.peak_index) return;
  tally->live_at_peak = tally->live;
  tally->peak_index = g_heap.peak_index;
}

inline void add_type_bytes(const SiteTally* tally, uint64_t time) {
  if (!tally->type) return;
  TypeTally& type = g_types[tally->type - 1];
  type.live_bytes += tally->size;
  if (type.live_bytes > type.peak_bytes) {
    type.peak_bytes = type.live_bytes;
    type.peak_time = time;
  }
}

inline void remove_type_bytes(const SiteTally* tally) {
  if (tally->type) g_types[tally->type - 1].live_bytes -= tally->size;
}

__attribute__((always_inline)) inline void add_block(SiteTally* tally, uint64_t time) {
  touch(tally);
  ++tally->live;
  ++tally->allocations;
  g_heap.bytes += tally->size;
  if (++g_heap.blocks > g_heap.peak_blocks) g_heap.peak_blocks = g_heap.blocks;
  if (g_heap.bytes > g_heap.peak_bytes) g_heap.rising_time = time;
  add_type_bytes(tally, time);
}

__attribute__((always_inline)) inline void remove_block(SiteTally* tally) {
  touch(tally);
  --tally->live;
  g_heap.bytes -= tally->size;
  --g_heap.blocks;
  remove_type_bytes(tally);
}

// A survivor's last block is gone: the ticker's next retire_sites() writes it as final.
inline void note_emptied(uint32_t thread, uint32_t site, const SiteTally* tally) {
  if (!tally->live && site < g_threads[thread].base) g_retire_due.store(true, std::memory_order_relaxed);
}

// Everyone takes the lock from now on; returns when the owner is out of its count.
// Whether the owner was counting without the lock until now.
bool end_ownership() {
  if (g_shared.load(std::memory_order_acquire)) return false;
  g_shared.store(true, std::memory_order_seq_cst);
  // The owner itself (the program's exit, its dump()) is not inside a count: no fence.
  if (tls_thread_state && tls_thread_state == g_owner_state.load(std::memory_order_acquire)) return true;
  syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  ThreadState* owner = g_owner_state.load(std::memory_order_acquire);
  for (int spins = 0; owner && owner->counting.load(std::memory_order_acquire); ++spins) {
    if (spins < 64)
      cpu_relax();
    else
      sched_yield();  // the owner may have been preempted inside its count
  }
  return true;
}

// The counts, read or held still under the lock by someone who counts nothing (the
// ticker writing a set, a dump, fork()) only pause the owner's lock-free counts:
// end_ownership() before taking the lock, this with the lock held, before it is
// released (`paused`: what end_ownership() returned). A long one-thread run writes a
// set every few seconds: ending the ownership for good there made every later count
// take the lock (a fifth of the loop's time). Handing it back under the lock is safe:
// no count is under way (counts that are not the owner's hold the lock), and one that
// waits for the lock ends the ownership itself once it has it (Counting::take_lock).
void resume_ownership(bool paused) {
  if (paused) g_shared.store(false, std::memory_order_release);
}

// One count of thread `t`: without the lock when it owns the counts (claiming them if
// no one has), else under it.
class Counting {
 public:
  // The owner's path inline (every count of a one-thread program), the lock's apart.
  __attribute__((always_inline)) explicit Counting(ThreadState* t) : t_(t) {
    if (__builtin_expect(!g_shared.load(std::memory_order_relaxed), 1) && owns(t)) {
      t->counting.store(true, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the other side's fence is the membarrier
      if (__builtin_expect(!g_shared.load(std::memory_order_relaxed), 1)) return;
      t->counting.store(false, std::memory_order_release);
    }
    take_lock();
  }
  __attribute__((always_inline)) ~Counting() {
    if (locked_)
      g_lock.unlock();
    else
      t_->counting.store(false, std::memory_order_release);
  }
  Counting(const Counting&) = delete;
  Counting& operator=(const Counting&) = delete;

 private:
  __attribute__((noinline)) void take_lock() {
    locked_ = true;
    bool waited = !g_lock.try_lock();
    if (waited) g_lock.lock();
    // Under the lock: the ownership may have been handed back while this count waited
    // for it (resume_ownership). Another thread counts: it ends. The owner here only
    // met a pause.
    if (g_owner.load(std::memory_order_relaxed) != t_->number) end_ownership();
    ++g_heap.locked_counts;
    g_heap.waited_counts += waited;
  }

  __attribute__((always_inline)) static bool owns(ThreadState* t) {
    uint32_t owner = g_owner.load(std::memory_order_relaxed);
    if (__builtin_expect(owner == t->number, 1)) return true;
    return claim(t, owner);
  }

  __attribute__((noinline)) static bool claim(ThreadState* t, uint32_t owner) {
    if (owner != 0) return false;
    if (!g_owner.compare_exchange_strong(owner, t->number)) return false;
    g_owner_state.store(t, std::memory_order_release);  // before its first "inside" flag
    return true;
  }

  ThreadState* t_;
  bool locked_ = false;
};

}  // namespace

void aggregate_note_waiting() {
  uint64_t counts, waited;
  {
    LockGuard guard(g_lock);
    counts = g_heap.locked_counts;
    waited = g_heap.waited_counts;
  }
  // Said when at least one count in twenty waited, over enough counts to matter.
  if (counts < 100000 || waited * 20 < counts) return;
  char percent[24];
  decimal_text(waited * 100 / counts, percent);
  note("aggregated mode: ", percent, "% of the counts waited for another thread's: every count takes one lock, "
       "and this program's threads allocate at once. The full mode (without --aggregate, HEAPTYPE_MODE=full) "
       "keeps each thread's events apart and runs such a program faster");
}

void aggregate_start() {
  bool fence = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  g_shared.store(!fence, std::memory_order_release);
}

namespace {

// The thread counts none of its sites below `horizon` again: the ticker retires them.
void forget_sites_below(ThreadState* t, uint32_t horizon) {
  {
    Counting counting(t);
    if (ThreadTallies* own = thread_tallies(t->number)) own->horizon = horizon;
  }
  g_retire_due.store(true, std::memory_order_relaxed);
  request_tick_work();
}

}  // namespace

void aggregate_forget_sites(ThreadState* t, uint32_t first_kept) { forget_sites_below(t, first_kept); }

void aggregate_thread_ended(ThreadState* t) {
  BlockedSignals blocked;  // the thread is not busy: a handler's allocation would wait for this count's lock
  forget_sites_below(t, kEnded);
}

void aggregate_alloc(ThreadState* t, uint32_t site) {
  uint64_t time = event_tick();
  Counting counting(t);
  SiteTally* tally = own_tally(t, site);
  if (!tally) return;
  if (tally->size == 0) confirm_peak();  // the heap does not grow: the peak was before
  add_block(tally, time);
  g_heap.last_open = true;
  g_heap.last_thread = t->number;
  g_heap.last_site = site;
  bump(t->allocations, 1);
}

void aggregate_free(ThreadState* t, uint32_t thread, uint32_t site) {
  Counting counting(t);
  bump(t->frees, 1);
  SiteTally* tally = find_tally(thread, site);
  if (!tally || !tally->live) return;  // not counted (no memory for it then)
  confirm_peak();
  remove_block(tally);
  note_emptied(thread, site, tally);
  if (g_heap.last_open && g_heap.last_thread == thread && g_heap.last_site == site) ++tally->temporaries;
  g_heap.last_open = false;
}

void aggregate_move(ThreadState* t, uint32_t thread, uint32_t site, uint32_t new_site) {
  uint64_t time = event_tick();
  Counting counting(t);
  SiteTally* from = find_tally(thread, site);
  if (!from || !from->live) return;
  SiteTally* to = own_tally(t, new_site);
  from = find_tally(thread, site);  // the table may have moved
  if (!to) return;
  confirm_peak();
  remove_block(from);
  --from->allocations;
  note_emptied(thread, site, from);
  add_block(to, time);
  // The rule follows the block to its new site (core/temporaries.hpp, TemporaryRule::moved).
  if (g_heap.last_open && thread == t->number && g_heap.last_thread == thread && g_heap.last_site == site)
    g_heap.last_site = new_site;
}

namespace {

// The blocks a tally had at the last confirmed peak (touch() keeps it lazily).
inline uint32_t live_at_peak(const SiteTally& s) {
  return s.peak_index == g_heap.peak_index ? s.live_at_peak : s.live;
}

// Writes `count` tallies of `thread` from `first`, as one TALLIES chunk.
void write_tallies(uint32_t thread, uint32_t first, const SiteTally* sites, size_t count, uint8_t* buffer) {
  uint8_t* p = put_varint(buffer, first);
  p = put_varint(p, count);
  for (size_t i = 0; i < count; ++i) {
    const SiteTally& s = sites[i];
    p = put_varint(p, s.allocations);
    p = put_varint(p, s.temporaries);
    p = put_varint(p, s.live);
    p = put_varint(p, live_at_peak(s));
  }
  writer_chunk(format::ChunkKind::kTallies, thread, buffer, static_cast<size_t>(p - buffer));
}

constexpr size_t kTalliesPerChunk = 2048;
// RETIRED and SURVIVORS chunks: entries naming their thread and site. One buffer holds
// the largest chunk of any kind (120 KiB; TALLIES take 4 varints a site after 2).
constexpr size_t kEntryBytes = 6 * format::kMaxVarint;
constexpr size_t kEntryBufferBytes = kTalliesPerChunk * kEntryBytes + format::kMaxVarint;
static_assert(kEntryBufferBytes >= kTalliesPerChunk * 4 * format::kMaxVarint + 2 * format::kMaxVarint,
              "a TALLIES chunk fits the buffer");

// Entries of (thread, site) counts gathered into chunks of `kind` (RETIRED: the peak
// they count against first; SURVIVORS: their blocks live now too).
class EntryChunks {
 public:
  EntryChunks(format::ChunkKind kind, uint8_t* buffer) : kind_(kind), buffer_(buffer) { start(); }
  ~EntryChunks() { flush(); }
  EntryChunks(const EntryChunks&) = delete;
  EntryChunks& operator=(const EntryChunks&) = delete;

  void add(uint32_t thread, uint32_t site, const SiteTally& s) {
    // Distances from the entry before: a run of sites of one thread is 0, 1, 1, ...
    p_ = put_varint(p_, format::zigzag(static_cast<int64_t>(thread) - previous_thread_));
    p_ = put_varint(p_, format::zigzag(static_cast<int64_t>(site) - previous_site_));
    previous_thread_ = thread;
    previous_site_ = site;
    p_ = put_varint(p_, s.allocations);
    p_ = put_varint(p_, s.temporaries);
    if (kind_ == format::ChunkKind::kSurvivors) p_ = put_varint(p_, s.live);
    p_ = put_varint(p_, live_at_peak(s));
    if (++count_ == kTalliesPerChunk) flush();
  }
  void add(const Survivor& survivor) {
    add(static_cast<uint32_t>(survivor.key >> 32), static_cast<uint32_t>(survivor.key), survivor.tally);
  }

 private:
  void start() {
    p_ = kind_ == format::ChunkKind::kRetired ? put_varint(buffer_, g_heap.peak_bytes) : buffer_;
    count_ = 0;
    previous_thread_ = previous_site_ = 0;
  }
  void flush() {
    if (count_) writer_chunk(kind_, 0, buffer_, static_cast<size_t>(p_ - buffer_));
    start();
  }

  format::ChunkKind kind_;
  uint8_t* buffer_;
  uint8_t* p_ = nullptr;
  size_t count_ = 0;
  int64_t previous_thread_ = 0;
  int64_t previous_site_ = 0;
};

// The counts of sites no thread will count again, written once as final: those with
// no live block of the generations threads forgot, and survivors whose last block is
// gone. Forgotten sites with live blocks become survivors. Under the lock.
void retire_sites(uint8_t* buffer) {
  g_retire_due.store(false, std::memory_order_relaxed);
  EntryChunks retired(format::ChunkKind::kRetired, buffer);
  for (uint32_t thread = 0; thread < g_threads_capacity; ++thread) {
    ThreadTallies& own = g_threads[thread];
    if (own.horizon <= own.base) continue;
    size_t forgotten = own.horizon - own.base < own.used ? own.horizon - own.base : own.used;
    for (size_t i = 0; i < forgotten; ++i) {
      const SiteTally& s = own.sites[i];
      uint32_t site = own.base + static_cast<uint32_t>(i);
      if (!s.allocations && !s.live) continue;  // never counted
      if (s.live && add_survivor(thread, site, s)) continue;
      retired.add(thread, site, s);  // (with live blocks: no memory to keep it, final as it stands)
    }
    if (forgotten) {  // the window moves up: the generation in use first, the rest empty
      std::memmove(own.sites, own.sites + forgotten, (own.used - forgotten) * sizeof(SiteTally));
      std::memset(own.sites + (own.used - forgotten), 0, forgotten * sizeof(SiteTally));
    }
    own.used -= forgotten;
    own.base = own.horizon;
    if (own.horizon == kEnded && own.sites) {  // a pool's threads come and go: their windows go too
      unmap_pages(own.sites, own.capacity * sizeof(SiteTally), MemoryUse::kSites);
      own.sites = nullptr;
      own.capacity = 0;
    }
  }
  for (size_t i = 0; i < g_survivors_capacity;) {
    Survivor& slot = g_survivors[i];
    if (!slot.key || slot.tally.live) {
      ++i;
      continue;
    }
    retired.add(slot);
    remove_survivor(i);  // a later slot may move here: looked at again
  }
}

void write_survivors(uint8_t* buffer) {
  EntryChunks survivors(format::ChunkKind::kSurvivors, buffer);
  for (size_t i = 0; i < g_survivors_capacity; ++i)
    if (g_survivors[i].key) survivors.add(g_survivors[i]);
}

// The AGGREGATE chunk: the heap's figures and every type's own peak.
void write_summary(uint64_t time, uint8_t* buffer, size_t capacity) {
  uint8_t* p = buffer;
  for (uint64_t v : {time, g_heap.bytes, g_heap.blocks, g_heap.peak_bytes, g_heap.peak_time, g_heap.peak_blocks})
    p = put_varint(p, v);
  p = put_varint(p, g_types_used);
  for (size_t i = 0; i < g_types_used; ++i) {
    const TypeTally& type = g_types[i];
    if (static_cast<size_t>(p - buffer) + 3 * format::kMaxVarint > capacity) break;  // cannot happen: sized below
    p = put_varint(p, type.tag);
    p = put_varint(p, type.peak_bytes);
    p = put_varint(p, type.peak_time);
  }
  writer_chunk(format::ChunkKind::kAggregate, 0, buffer, static_cast<size_t>(p - buffer));
}

// A set: what retire_sites() leaves, each thread's window as TALLIES chunks and the
// survivors, closed by the AGGREGATE chunk. The buffer's pages are touched as far as
// the largest chunk needs (mapped, not present).
void write_counts_locked(uint64_t time) {
  confirm_peak();  // the moment written counts as a moment of the run
  size_t buffer_size = kEntryBufferBytes;
  size_t summary_size = (8 + 3 * g_types_used) * format::kMaxVarint;
  if (summary_size > buffer_size) buffer_size = summary_size;
  uint8_t* buffer = static_cast<uint8_t*>(map_pages(buffer_size, MemoryUse::kWriter));
  if (!buffer) return;
  retire_sites(buffer);
  for (uint32_t thread = 0; thread < g_threads_capacity; ++thread) {
    const ThreadTallies& own = g_threads[thread];
    for (size_t first = 0; first < own.used; first += kTalliesPerChunk) {
      size_t count = own.used - first < kTalliesPerChunk ? own.used - first : kTalliesPerChunk;
      write_tallies(thread, own.base + static_cast<uint32_t>(first), own.sites + first, count, buffer);
    }
  }
  write_survivors(buffer);
  write_summary(time, buffer, buffer_size);
  unmap_pages(buffer, buffer_size, MemoryUse::kWriter);
}

bool g_paused_for_fork = false;

}  // namespace

// The counts are written as they stand at one moment: the lock is held throughout
// (signals blocked: a handler's allocation on this thread would wait for it forever).
void write_aggregate(uint64_t time) {
  BlockedSignals blocked;
  bool paused = end_ownership();
  LockGuard guard(g_lock);
  write_counts_locked(time);
  resume_ownership(paused);
}

void aggregate_retire_when_due() {
  if (!g_retire_due.load(std::memory_order_relaxed)) return;
  BlockedSignals blocked;
  bool paused = end_ownership();
  LockGuard guard(g_lock);
  if (uint8_t* buffer = static_cast<uint8_t*>(map_pages(kEntryBufferBytes, MemoryUse::kWriter))) {
    retire_sites(buffer);
    unmap_pages(buffer, kEntryBufferBytes, MemoryUse::kWriter);
  }
  resume_ownership(paused);
}

void aggregate_lock_for_fork() {
  g_paused_for_fork = end_ownership();
  g_lock.lock();
}
// In the parent; the child starts afresh (aggregate_reset_in_child).
void aggregate_unlock_after_fork() {
  resume_ownership(g_paused_for_fork);
  g_paused_for_fork = false;
  g_lock.unlock();
}

// The child's profile starts empty: the parent's blocks are not its own (see fork_child).
void aggregate_reset_in_child() {
  for (size_t i = 0; i < g_threads_capacity; ++i)
    if (g_threads[i].capacity) unmap_pages(g_threads[i].sites, g_threads[i].capacity * sizeof(SiteTally), MemoryUse::kSites);
  if (g_threads) unmap_pages(g_threads, g_threads_capacity * sizeof(ThreadTallies), MemoryUse::kSites);
  if (g_types) unmap_pages(g_types, g_types_capacity * sizeof(TypeTally), MemoryUse::kTypes);
  if (g_type_index) unmap_pages(g_type_index, g_type_index_capacity * sizeof(uint32_t), MemoryUse::kTypes);
  if (g_survivors) unmap_pages(g_survivors, g_survivors_capacity * sizeof(Survivor), MemoryUse::kSites);
  g_survivors = nullptr;
  g_survivors_capacity = g_survivors_used = 0;
  g_retire_due.store(false);
  g_threads = nullptr;
  g_threads_capacity = 0;
  g_types = nullptr;
  g_types_capacity = g_types_used = 0;
  g_type_index = nullptr;
  g_type_index_capacity = 0;
  g_heap = Heap();
  g_owner.store(0);
  g_owner_state.store(nullptr);
  aggregate_start();  // a new process: its counts may have an owner again
  g_lock.unlock();
}

}  // namespace runtime
}  // namespace heaptype
