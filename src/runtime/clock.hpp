// clock.hpp: a cheap timestamp for every event, exact where threads meet.
//
// Reading a clock on each of millions of allocations costs more than the rest of
// the bookkeeping (clock_gettime: ~29 ns, rdtsc: ~11 ns on these machines). A
// ticker thread instead publishes the time every interval (HEAPTYPE_CLOCK_US,
// default 1000), and an event reads one shared word: times are nanoseconds since
// the profile started, as of the last tick.
//
// The reader merges the threads by time, so a tick's worth of one thread's events
// could land before another thread's, whatever happened first. Where the order
// matters for a peak, threads meet: a block allocated by one thread and freed by
// another. A free of another thread's block reads the real clock, is stamped
// strictly after the allocation (whose stamp the freeing thread can see: the block
// reached it through the program's own synchronisation), and moves the shared
// clock past itself. Whatever the freeing thread lets happen next (a semaphore
// post, a queue slot) is stamped later than the free. The shared clock only moves
// forward (compare-and-swap on the ticker's and the remote frees' updates only).
#ifndef HEAPTYPE_RUNTIME_CLOCK_HPP
#define HEAPTYPE_RUNTIME_CLOCK_HPP

#include <atomic>
#include <cstdint>

namespace heaptype {
namespace runtime {

constexpr uint64_t kClockTickNs = 1;  // the unit of the profile's TIME deltas

extern std::atomic<uint64_t> g_clock;
extern std::atomic<bool> g_ticker_running;

// The time of an ordinary event: the last published tick.
inline uint64_t now_tick() noexcept { return g_clock.load(std::memory_order_relaxed); }

// The time of an event where threads meet (a free of another thread's block):
// later than any tick published so far and than the real clock, and published.
uint64_t meeting_tick() noexcept;

uint64_t monotonic_ns();
uint64_t realtime_ns();
// Since boot, suspended time included (what /proc's start times count from).
uint64_t boottime_ns();

// Starts the ticker (idempotent). `on_tick_second` runs on the ticker thread
// about once a second: the periodic flush.
void start_clock(uint64_t interval_us, void (*on_tick_second)());
// The runtime's clock: the ticker waits until the run is `after_ns` old, so that a
// process of a few milliseconds (a test case's) never starts a thread (its creation,
// and every later unmapping then interrupting the other core, cost a test process
// ~0.3 ms; a second thread is also what GoogleTest's death tests warn of before each
// fork). Until then the threads' events publish the time themselves from the coarse
// clock (tick_without_ticker: steps of a jiffy, ~4 ms, instead of the ticker's 1 ms).
void start_clock_deferred(uint64_t interval_us, void (*on_tick_second)(), uint64_t after_ns);
// The time while the ticker waits, published; *due: the ticker should start now (the
// run is old enough, or a snapshot was asked for): start_deferred_ticker.
uint64_t tick_without_ticker(bool* due) noexcept;
// Starts the waiting ticker, once whichever thread comes first. It allocates (the
// thread's static TLS): the caller keeps that out of the profile.
void start_deferred_ticker();
// Runs `on_tick_second` at the next tick instead of up to a second later.
// Async-signal-safe (one atomic store): a signal handler's way to get work done.
void request_tick_work();
// Whether the ticker thread runs (it writes the buffers threads hand over); false
// while a deferred one waits.
inline bool clock_running() { return g_ticker_running.load(std::memory_order_relaxed); }

// The time of an ordinary event: the ticker's last tick, or while it waits the coarse
// clock's (published).
// kOrdinary: the caller saw ordinary() (tracker.hpp), so the ticker runs.
template <bool kOrdinary = false>
__attribute__((always_inline)) inline uint64_t event_tick() noexcept {
  if (kOrdinary || __builtin_expect(clock_running(), 1)) return now_tick();
  bool due;
  return tick_without_ticker(&due);
}
// After fork only the forking thread survives: the child starts a new ticker, and its
// times count from the fork.
void clock_after_fork_in_child();

}  // namespace runtime
}  // namespace heaptype

#endif
