// temporaries.hpp: which frees end a temporary allocation, by heaptrack's rule.
//
// heaptrack (src/analyze/accumulatedtracedata.cpp, `lastAllocationPtr`) counts a free as
// temporary when the event just before it, in the program's one order of allocation
// events, is an allocation of the same allocation info (size and call stack: our
// site) as the freed block's. Any free in between ends it; frees of pointers heaptrack
// never saw are not events (it drops them), and neither are our MOVE and STACK records.
// A realloc is a free of the old block then an allocation of the new one (both
// heaptrack and the runtime record it so, except the runtime's realloc of a block still
// waiting for its type, recorded allocation first). Alloc A, alloc B, free B, free A
// gives one temporary (B); ten blocks of one site freed in order right after the tenth
// allocation give one too (the first free follows an allocation at its site), none
// when anything else is allocated or freed before the first free.
//
// heaptrack also counts, by accident, a free of its very first allocation info that
// follows a free (it marks "no allocation" with index 0, which is also that info's
// index). A preloaded C++ program's first allocation is libstdc++'s exception pool,
// freed at exit: when a free comes just before, heaptrack_print shows one temporary
// more than this rule (tests/integration/test_heaptrack_crosscheck.py).
//
// Threads: heaptrack writes every thread's events under one lock, in one order. The
// profile holds one stream per thread; the analysis merges them by their clock ticks
// (HEAPTYPE_CLOCK_US, 1 ms by default), a thread's events in its own order, and within
// one tick the lower-numbered thread's events first (event_merge.hpp). The rule runs on
// that merged order: another thread's event in a tick after the allocation's and
// before the free's ends the pair, as it does for heaptrack; events of other threads
// in the same tick as the allocation or the free stand where the merge put them (by
// thread number), which need not be where they happened. A thread's pair within one
// tick stays together (unless a free waits for another thread's allocation), so a
// multi-threaded program usually counts a few more temporaries than heaptrack (and,
// rarely, fewer).
// A single-threaded program gets exactly heaptrack's order and count.
#ifndef HEAPTYPE_CORE_TEMPORARIES_HPP
#define HEAPTYPE_CORE_TEMPORARIES_HPP

#include <cstdint>

namespace heaptype {
namespace core {

class TemporaryRule {
 public:
  // An allocation at (thread, site): the next free of that site is temporary.
  void allocated(uint32_t thread, uint32_t site) {
    open_ = true;
    last_ = key(thread, site);
  }

  // The allocating thread gave a block of the last allocation's site a type (MOVE):
  // the free names the new site.
  void moved(uint32_t stream, uint32_t thread, uint32_t site, uint32_t new_site) {
    if (open_ && stream == thread && last_ == key(thread, site)) last_ = key(thread, new_site);
  }

  // A free of a block at (thread, site): temporary when the event before it was an
  // allocation at that site. Every free ends the open allocation.
  bool freed(uint32_t thread, uint32_t site) {
    bool temporary = open_ && last_ == key(thread, site);
    open_ = false;
    return temporary;
  }

  // allocated() or else freed(), without branching on which (the analysis' plain runs
  // mix them unpredictably).
  bool allocated_or_freed(bool alloc, uint32_t thread, uint32_t site) {
    uint64_t k = key(thread, site);
    bool temporary = static_cast<unsigned>(open_) & static_cast<unsigned>(last_ == k) & static_cast<unsigned>(!alloc);
    last_ = alloc ? k : last_;
    open_ = alloc;
    return temporary;
  }

 private:
  static uint64_t key(uint32_t thread, uint32_t site) { return static_cast<uint64_t>(thread) << 32 | site; }
  bool open_ = false;
  uint64_t last_ = 0;  // (thread, site) of the open allocation
};

}  // namespace core
}  // namespace heaptype

#endif
