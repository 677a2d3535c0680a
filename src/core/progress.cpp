#include "progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace heaptype {
namespace core {

ProgressFn stderr_progress() {
  bool tty = isatty(STDERR_FILENO) != 0;
  return [tty](const std::string& step, double fraction) {
    int percent = static_cast<int>(fraction * 100 + 0.5);
    if (tty) {
      std::fprintf(stderr, "\rheaptype: %s... %3d%%%s", step.c_str(), percent, fraction >= 1 ? "\n" : "");
    } else if (fraction >= 1) {
      std::fprintf(stderr, "heaptype: %s... done\n", step.c_str());
    }
    std::fflush(stderr);
  };
}

ProgressTicker::ProgressTicker(ProgressFn fn, std::string step, double delay)
    : fn_(std::move(fn)), step_(std::move(step)), start_(Clock::now()), last_(start_), delay_(delay) {}

void ProgressTicker::update(double fraction) {
  if (!fn_ || finished_) return;
  Clock::time_point now = Clock::now();
  if (std::chrono::duration<double>(now - start_).count() < delay_) return;
  if (shown_ && std::chrono::duration<double>(now - last_).count() < 0.1) return;
  shown_ = true;
  last_ = now;
  fn_(step_, fraction < 1 ? fraction : 0.999);
}

void ProgressTicker::done() {
  if (finished_) return;
  finished_ = true;
  if (shown_ && fn_) fn_(step_, 1.0);
}

}  // namespace core
}  // namespace heaptype
