#include "snapshot_signal.hpp"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "clock.hpp"
#include "diagnostics.hpp"

namespace heaptype {
namespace runtime {
namespace {

std::atomic<bool> g_requested{false};

// Async-signal-safe: two atomic stores.
void on_snapshot_signal(int) {
  g_requested.store(true, std::memory_order_relaxed);
  request_tick_work();
}

struct SignalName {
  const char* name;
  int number;
};

const SignalName kNames[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
                             {"PROF", SIGPROF}, {"URG", SIGURG},   {"WINCH", SIGWINCH}};

// "USR2", "SIGUSR2" or "12"; -1 when unknown, 0 for off (also when unset: a
// signal's default action is the program's, e.g. a test that raises SIGUSR2 to die).
int signal_number(const char* text) {
  if (!text || !*text) return 0;
  char* end = nullptr;
  long n = strtol(text, &end, 10);
  if (end && !*end) return n >= 0 && n < NSIG ? static_cast<int>(n) : -1;
  if (strncasecmp(text, "SIG", 3) == 0) text += 3;
  for (const SignalName& s : kNames)
    if (strcasecmp(text, s.name) == 0) return s.number;
  return -1;
}

}  // namespace

bool install_snapshot_signal() {
  int number = signal_number(getenv("HEAPTYPE_SIGNAL"));
  if (number == 0) return false;
  if (number < 0) {
    note("HEAPTYPE_SIGNAL: unknown signal; no snapshot signal");
    return false;
  }
  struct sigaction current;
  if (sigaction(number, nullptr, &current) != 0) return false;
  // The program's own handler (or its choice to ignore the signal) comes first.
  if (current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO)) return false;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_snapshot_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  return sigaction(number, &action, nullptr) == 0;
}

bool take_snapshot_request() { return g_requested.exchange(false, std::memory_order_relaxed); }

}  // namespace runtime
}  // namespace heaptype
