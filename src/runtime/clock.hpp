// clock.hpp: a cheap timestamp for every event.
//
// Reading a clock on each of millions of allocations costs more than the rest of
// the bookkeeping (clock_gettime: ~29 ns, rdtsc: ~11 ns on these machines). A
// ticker thread instead publishes the time every interval, and an event reads one
// shared word. Times are in microseconds since the profile started; their
// resolution is the ticker interval (HEAPTYPE_CLOCK_US, default 1000).
#ifndef HEAPTYPE_RUNTIME_CLOCK_HPP
#define HEAPTYPE_RUNTIME_CLOCK_HPP

#include <atomic>
#include <cstdint>

namespace heaptype {
namespace runtime {

extern std::atomic<uint64_t> g_clock_us;

inline uint64_t now_us() noexcept { return g_clock_us.load(std::memory_order_relaxed); }

uint64_t monotonic_ns();
uint64_t realtime_ns();

// Starts the ticker (idempotent). `on_tick_second` runs on the ticker thread
// about once a second: the periodic flush.
void start_clock(uint64_t interval_us, void (*on_tick_second)());
// After fork only the forking thread survives: the child starts a new ticker.
void clock_after_fork_in_child();

}  // namespace runtime
}  // namespace heaptype

#endif
