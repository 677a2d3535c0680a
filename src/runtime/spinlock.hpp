// spinlock.hpp: the runtime's only lock.
//
// A pthread mutex may allocate or be unusable during static initialisation; this
// lock is a zero-initialised byte, valid before any constructor has run. Critical
// sections are a few dozen instructions, so spinning briefly and then yielding the
// CPU beats sleeping.
#ifndef HEAPTYPE_RUNTIME_SPINLOCK_HPP
#define HEAPTYPE_RUNTIME_SPINLOCK_HPP

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <atomic>

namespace heaptype {
namespace runtime {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// ThreadSanitizer's annotations, when the program runs under it (weak: null otherwise).
// The runtime is not built with the sanitizer, so TSan sees none of its atomics; it does
// see the memcpy calls inside what the lock guards (the profile's compression stream)
// and would take two threads' turns at it for a race.
extern "C" void __tsan_acquire(void* address) __attribute__((weak));
extern "C" void __tsan_release(void* address) __attribute__((weak));

class SpinLock {
 public:
  void lock() noexcept {
    for (;;) {
      if (!locked_.exchange(true, std::memory_order_acquire)) {
        if (__tsan_acquire) __tsan_acquire(this);
        return;
      }
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins < 64) {
          cpu_relax();
        } else {
          sched_yield();
        }
      }
    }
  }
  // True when the lock was free and is now taken.
  bool try_lock() noexcept {
    if (locked_.load(std::memory_order_relaxed) || locked_.exchange(true, std::memory_order_acquire)) return false;
    if (__tsan_acquire) __tsan_acquire(this);
    return true;
  }
  void unlock() noexcept {
    if (__tsan_release) __tsan_release(this);
    locked_.store(false, std::memory_order_release);
  }

 private:
  std::atomic<bool> locked_{false};
};

class LockGuard {
 public:
  explicit LockGuard(SpinLock& lock) noexcept : lock_(lock) { lock_.lock(); }
  ~LockGuard() { lock_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  SpinLock& lock_;
};

// Every signal blocked on this thread for a scope: a lock that code reachable from a
// signal handler takes too (an allocation in a handler maps memory) is held with
// signals blocked, so that no handler can interrupt its holder and wait for it forever.
// The ticker thread is started the same way, so that it never runs the program's
// handlers. A system call each way: for what is rare, never for an allocation.
class BlockedSignals {
 public:
  BlockedSignals() noexcept {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old_);
  }
  ~BlockedSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

 private:
  sigset_t old_;
};

}  // namespace runtime
}  // namespace heaptype

#endif
