// figures.hpp: what the analysis counts for every group of allocations (a type, a
// function, a call-path node, a thread, the whole profile).
#ifndef HEAPTYPE_CORE_FIGURES_HPP
#define HEAPTYPE_CORE_FIGURES_HPP

#include <cstdint>

namespace heaptype {
namespace core {

// Times are clock ticks of the profile (see ProfileFile::header().clock_tick_ns)
// until the bindings turn them into microseconds.
struct Figures {
  uint64_t allocations = 0;
  uint64_t objects = 0;              // T[n] counts n; an untyped block counts one
  uint64_t bytes = 0;                // allocated in all
  // Now (at the end: never freed). Signed: within one clock tick the merge may
  // meet a free before the allocation it matches (see event_merge.hpp).
  int64_t live_bytes = 0;
  int64_t live_blocks = 0;
  uint64_t peak_bytes = 0;           // the most live bytes of this group at any moment
  uint64_t peak_time = 0;            // when that was first reached
  uint64_t temporary_allocations = 0;  // freed as the next allocation event (temporaries.hpp)

  // The live figures are signed, and a damaged profile can make them any size (an
  // aggregated site's count is any varint): they add in wrapping arithmetic, where a
  // signed sum could overflow. A sound profile never comes near the limit.
  static int64_t plus(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  }
  static int64_t minus(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  }

  void allocate(uint64_t size, uint64_t objects_in_block, uint64_t time) {
    ++allocations;
    objects += objects_in_block;
    bytes += size;
    add_live(size, time);
  }

  void add_live(uint64_t size, uint64_t time) {
    live_bytes = plus(live_bytes, static_cast<int64_t>(size));
    live_blocks = plus(live_blocks, 1);
    if (live_bytes > 0 && static_cast<uint64_t>(live_bytes) > peak_bytes) {
      peak_bytes = static_cast<uint64_t>(live_bytes);
      peak_time = time;
    }
  }

  // An allocation (`alloc`) or else a free (`temporary`: of a temporary allocation, as
  // counted), as allocate() or release(), without branching on which: a pass that mixes
  // them unpredictably would otherwise pay a mispredicted branch per event.
  void allocate_or_release(bool alloc, uint64_t size, uint64_t objects_in_block, bool temporary, uint64_t time) {
    uint64_t a = alloc;
    allocations += a;
    objects += a * objects_in_block;
    bytes += a * size;
    int64_t sign = static_cast<int64_t>(2 * a) - 1;
    live_bytes = plus(live_bytes, sign * static_cast<int64_t>(size));
    live_blocks = plus(live_blocks, sign);
    temporary_allocations += temporary && !alloc;
    if (alloc & (live_bytes > 0) & (static_cast<uint64_t>(live_bytes) > peak_bytes)) {
      peak_bytes = static_cast<uint64_t>(live_bytes);
      peak_time = time;
    }
  }

  // allocate_or_release() in two parts, for a group that follows many events at once:
  // the live bytes (and the peak) at each event, then the counts the events added,
  // as another group's counts_since() tells them.
  void move_live(int64_t change, bool alloc, uint64_t time) {
    live_bytes = plus(live_bytes, change);
    if (alloc & (live_bytes > 0) & (static_cast<uint64_t>(live_bytes) > peak_bytes)) {
      peak_bytes = static_cast<uint64_t>(live_bytes);
      peak_time = time;
    }
  }
  Figures counts_since(const Figures& before) const {
    Figures d;
    d.allocations = allocations - before.allocations;
    d.objects = objects - before.objects;
    d.bytes = bytes - before.bytes;
    d.live_blocks = minus(live_blocks, before.live_blocks);
    d.temporary_allocations = temporary_allocations - before.temporary_allocations;
    return d;
  }
  void add_counts(const Figures& d) {
    allocations += d.allocations;
    objects += d.objects;
    bytes += d.bytes;
    live_blocks = plus(live_blocks, d.live_blocks);
    temporary_allocations += d.temporary_allocations;
  }

  // Live again without a new peak: a free that matched nothing is taken back.
  void restore_live(uint64_t size) {
    live_bytes = plus(live_bytes, static_cast<int64_t>(size));
    live_blocks = plus(live_blocks, 1);
  }

  void release(uint64_t size, bool temporary) {
    live_bytes = minus(live_bytes, static_cast<int64_t>(size));
    live_blocks = minus(live_blocks, 1);
    if (temporary) ++temporary_allocations;
  }

  // An aggregated profile's counts of one site (aggregate_analysis.cpp): everything adds
  // up, the peak being what was live at the heap's peak.
  void add_aggregated(const Figures& site) {
    add_counts(site);
    live_bytes = plus(live_bytes, site.live_bytes);
    if (site.peak_bytes) {
      peak_bytes += site.peak_bytes;
      peak_time = site.peak_time;
    }
  }

  // A block leaves this group for another one (it got its type late): as if it
  // had never been allocated here. Peaks stay: they happened.
  void unallocate(uint64_t size, uint64_t objects_in_block) {
    --allocations;
    objects -= objects_in_block;
    bytes -= size;
    live_bytes = minus(live_bytes, static_cast<int64_t>(size));
    live_blocks = minus(live_blocks, 1);
  }
};

}  // namespace core
}  // namespace heaptype

#endif
