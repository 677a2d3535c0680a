#include "clock.hpp"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "spinlock.hpp"
#include "tracker.hpp"

namespace heaptype {
namespace runtime {

std::atomic<uint64_t> g_clock{0};
std::atomic<bool> g_ticker_running{false};

namespace {

uint64_t g_start_ns = 0;
uint64_t g_interval_us = 1000;
void (*g_on_second)() = nullptr;
std::atomic<bool> g_work_requested{false};
// A ticker left waiting by start_clock_deferred, until the run is g_defer_ns old.
std::atomic<bool> g_deferred{false};
uint64_t g_defer_ns = 0;

uint64_t read_clock(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Moves the shared clock forward to `tick` unless it is there already.
void advance_to(uint64_t tick) {
  uint64_t seen = g_clock.load(std::memory_order_relaxed);
  while (seen < tick && !g_clock.compare_exchange_weak(seen, tick, std::memory_order_relaxed)) {
  }
}

uint64_t elapsed_ns() { return monotonic_ns() - g_start_ns; }

uint64_t coarse_elapsed_ns() {
  uint64_t now = read_clock(CLOCK_MONOTONIC_COARSE);  // behind the fine clock by up to a jiffy
  return now > g_start_ns ? now - g_start_ns : 0;
}

void publish_now() { advance_to(elapsed_ns()); }

void* ticker_main(void*) {
  timespec interval;
  interval.tv_sec = static_cast<time_t>(g_interval_us / 1000000);
  interval.tv_nsec = static_cast<long>((g_interval_us % 1000000) * 1000);
  uint64_t last_second = monotonic_ns();
  for (;;) {
    nanosleep(&interval, nullptr);
    publish_now();
    uint64_t now = monotonic_ns();
    bool asked = g_work_requested.load(std::memory_order_relaxed) &&
                 g_work_requested.exchange(false, std::memory_order_relaxed);
    if ((asked || now - last_second >= 1000000000ull) && g_on_second) {
      last_second = now;
      g_on_second();
    }
  }
  return nullptr;
}

void spawn_ticker() {
  // The ticker must never run the program's signal handlers: it inherits this mask.
  BlockedSignals blocked;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t thread;
  if (pthread_create(&thread, &attr, ticker_main, nullptr) != 0) {
    g_ticker_running.store(false);
    refresh_ordinary();
  }
  pthread_attr_destroy(&attr);
}

}  // namespace

uint64_t meeting_tick() noexcept {
  uint64_t published = g_clock.load(std::memory_order_relaxed);
  uint64_t now = elapsed_ns();
  uint64_t tick = now > published ? now : published + 1;
  advance_to(tick + 1);
  return tick;
}

void request_tick_work() { g_work_requested.store(true, std::memory_order_relaxed); }

uint64_t monotonic_ns() { return read_clock(CLOCK_MONOTONIC); }
uint64_t realtime_ns() { return read_clock(CLOCK_REALTIME); }
uint64_t boottime_ns() { return read_clock(CLOCK_BOOTTIME); }

void set_up_clock(uint64_t interval_us, void (*on_tick_second)()) {
  if (g_start_ns == 0) g_start_ns = monotonic_ns();
  g_interval_us = interval_us ? interval_us : 1000;
  g_on_second = on_tick_second;
  publish_now();
}

void start_clock(uint64_t interval_us, void (*on_tick_second)()) {
  if (g_ticker_running.exchange(true)) return;
  refresh_ordinary();
  g_deferred.store(false);
  set_up_clock(interval_us, on_tick_second);
  spawn_ticker();
}

void start_clock_deferred(uint64_t interval_us, void (*on_tick_second)(), uint64_t after_ns) {
  if (g_ticker_running.load()) return;
  set_up_clock(interval_us, on_tick_second);
  g_defer_ns = after_ns;
  g_deferred.store(true);
}

uint64_t tick_without_ticker(bool* due) noexcept {
  uint64_t now = coarse_elapsed_ns();
  if (now > g_clock.load(std::memory_order_relaxed)) advance_to(now);
  *due = g_deferred.load(std::memory_order_relaxed) &&
         (now >= g_defer_ns || g_work_requested.load(std::memory_order_relaxed));
  return g_clock.load(std::memory_order_relaxed);
}

void start_deferred_ticker() {
  if (!g_deferred.exchange(false)) return;  // another thread started it
  g_ticker_running.store(true);
  refresh_ordinary();
  spawn_ticker();
}

void clock_after_fork_in_child() {
  // The child's profile starts at the fork: its times count from there, not from the
  // parent's start (a worker forked at 3.8 s had 3.8 s of nothing before its first event).
  g_start_ns = monotonic_ns();
  g_clock.store(0, std::memory_order_relaxed);
  bool was_deferred = g_deferred.load();
  g_ticker_running.store(false);
  refresh_ordinary();
  if (was_deferred)
    start_clock_deferred(g_interval_us, g_on_second, g_defer_ns);
  else
    start_clock(g_interval_us, g_on_second);
}

}  // namespace runtime
}  // namespace heaptype
