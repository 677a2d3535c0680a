// progress.hpp: progress of long steps, shown on stderr only when a step takes
// longer than a second (quiet runs stay quiet).
#ifndef HEAPTYPE_CORE_PROGRESS_HPP
#define HEAPTYPE_CORE_PROGRESS_HPP

#include <chrono>
#include <functional>
#include <string>

namespace heaptype {
namespace core {

// Receives a step's name and how far it is (0..1); fraction 1 ends the step.
using ProgressFn = std::function<void(const std::string& step, double fraction)>;

// Writes "heaptype: <step>... 42%" to stderr, in place on a terminal.
ProgressFn stderr_progress();

// Calls a ProgressFn at most ten times a second, and only once the step has run
// for `delay` seconds.
class ProgressTicker {
 public:
  ProgressTicker(ProgressFn fn, std::string step, double delay = 1.0);
  ~ProgressTicker() { done(); }
  void update(double fraction);
  void done();

 private:
  using Clock = std::chrono::steady_clock;
  ProgressFn fn_;
  std::string step_;
  Clock::time_point start_;
  Clock::time_point last_;
  double delay_;
  bool shown_ = false;
  bool finished_ = false;
};

}  // namespace core
}  // namespace heaptype

#endif
