// spinlock.hpp: the runtime's only lock.
//
// A pthread mutex may allocate or be unusable during static initialisation; this
// lock is a zero-initialised byte, valid before any constructor has run. Critical
// sections are a few dozen instructions, so spinning briefly and then yielding the
// CPU beats sleeping.
#ifndef HEAPTYPE_RUNTIME_SPINLOCK_HPP
#define HEAPTYPE_RUNTIME_SPINLOCK_HPP

#include <sched.h>

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

}  // namespace runtime
}  // namespace heaptype

#endif
