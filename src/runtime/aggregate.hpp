// aggregate.hpp: the aggregated mode (HEAPTYPE_MODE=aggregate, `heaptype run --aggregate`).
//
// A long run cannot keep one record per allocation: a server allocating a million
// blocks a second writes gigabytes an hour. In this mode the runtime keeps, for every
// (thread, site), how many blocks were allocated there, how many of them were
// temporary (heaptrack's rule, temporaries.hpp in the core), how many are live now and
// how many were live at the peak of the whole heap; and for every type its own peak.
// Memory grows with sites and types, never with events. The definitions (SITE, NODE,
// THREAD records) still go to the file as they happen; the counts are written as a
// set of TALLIES chunks closed by an AGGREGATE chunk at exit, at every snapshot and at
// dump() (the reader takes the last whole set, see profile_format.hpp).
//
// The peak is exact: every count changes under one lock, in one order, and the peak
// is kept lazily as memray's high-water-mark aggregator does. The heap's largest size
// so far is confirmed when something other than an allocation comes next (the first
// moment it was reached is the peak, as the event analysis has it); each site keeps
// its count at the last confirmed peak the first time it changes after it, so a site
// untouched since then still holds it in its current count. O(1) per event.
//
// The owner of the events calls these with `busy` set (a signal handler's events wait,
// thread_state.hpp), so the lock is never taken twice on one thread.
//
// Most programs that run long on one thread pay no lock: the first thread to count owns
// the counts and skips it, until anything else needs them (another thread's first event,
// a set of counts written, a snapshot, dump(), fork()). That one sets `shared` and waits
// until the owner is out of its count: a membarrier(2) makes the owner's "inside" flag
// visible to it, or the flag `shared` visible to the owner (an asymmetric fence: the
// owner's side is a plain store and load). Another thread's count ends the ownership
// for good: from then on everyone takes the lock. A writer of the counts only pauses
// it, and hands it back when done. Without membarrier, everyone always takes the lock.
#ifndef HEAPTYPE_RUNTIME_AGGREGATE_HPP
#define HEAPTYPE_RUNTIME_AGGREGATE_HPP

#include <cstdint>

namespace heaptype {
namespace runtime {

struct ThreadState;

// Set at start-up (HEAPTYPE_MODE=aggregate) and cleared when the profile is finished:
// whatever happens after the END chunk (static destructors) is written as events.
extern bool g_aggregating;
inline bool aggregating() { return __builtin_expect(g_aggregating, 0); }

// One allocation at this thread's `site` (defined: its size is known from it).
void aggregate_alloc(ThreadState* t, uint32_t site);
// A free of a block of (thread, site).
void aggregate_free(ThreadState* t, uint32_t thread, uint32_t site);
// The block counted at (thread, site) counts at this thread's `new_site` from now on.
void aggregate_move(ThreadState* t, uint32_t thread, uint32_t site, uint32_t new_site);

// The thread forgot its sites below `first_kept` (a new generation, thread_state.hpp):
// they are never counted again, and the ticker retires them (RETIRED chunks).
void aggregate_forget_sites(ThreadState* t, uint32_t first_kept);
// The thread ends: none of its sites is counted again (its blocks' frees still are).
void aggregate_thread_ended(ThreadState* t);
// On the ticker: writes the final counts of forgotten sites, when some are due.
void aggregate_retire_when_due();

// At start-up, in aggregated mode: whether the first counting thread may skip the lock.
void aggregate_start();
// At the end: a note (HEAPTYPE_LOG) when the program's threads often waited for the lock.
void aggregate_note_waiting();
// Writes the counts as they are now: TALLIES chunks, then an AGGREGATE chunk.
void write_aggregate(uint64_t time);
// Fork: the lock is held across fork(); the child starts with no counts.
void aggregate_lock_for_fork();
void aggregate_unlock_after_fork();
void aggregate_reset_in_child();

}  // namespace runtime
}  // namespace heaptype

#endif
