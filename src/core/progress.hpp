// progress.hpp: progress of slow steps, reported through a callback that the
// symbolizer and the aggregation engine can share. A step says nothing unless it
// runs for longer than a delay (one second by default).
#ifndef HEAPTYPE_CORE_PROGRESS_HPP
#define HEAPTYPE_CORE_PROGRESS_HPP

#include <chrono>
#include <functional>
#include <string>

namespace heaptype {
namespace core {

struct ProgressEvent {
  std::string task;        // what is being done: "reading debug info of foo (61 MB)"
  double fraction = -1;    // 0..1 done, negative when unknown
  std::string detail;      // shown when the fraction is unknown: "12000 addresses"
  double seconds = 0;      // since the task began
  bool finished = false;   // the last event of the task
};

using ProgressFn = std::function<void(const ProgressEvent&)>;

// The default: stderr. On a terminal one line "heaptype: TASK... 40%" rewritten
// in place and ended with "done in 1.8 s"; elsewhere (logs, CI) only that final line.
ProgressFn stderr_progress();

// The text of one event, without line ending: "heaptype: TASK... 40%".
std::string progress_text(const ProgressEvent& event);

// One step that may be slow. Reports nothing until it has run for `delay`
// seconds, then at most ten times a second, and a final event when it finishes
// if it reported anything. update() is cheap enough to call per item.
// `already`: seconds the same work spent in earlier steps (a symbolization
// split into several calls), counted as if this task had run them.
class ProgressTask {
 public:
  ProgressTask(ProgressFn report, std::string task, double delay = 1.0, double already = 0);
  ~ProgressTask() { finish(); }
  ProgressTask(const ProgressTask&) = delete;
  ProgressTask& operator=(const ProgressTask&) = delete;

  void update(double fraction, const std::string& detail = "");
  void finish();
  bool shown() const { return shown_; }

 private:
  using Clock = std::chrono::steady_clock;
  double elapsed() const;
  void emit(double fraction, const std::string& detail, bool finished);

  ProgressFn report_;
  std::string task_;
  double delay_;
  Clock::time_point started_;
  double last_emit_ = -1;
  double last_fraction_ = -1;
  std::string last_detail_;
  bool shown_ = false;
  bool finished_ = false;
};

}  // namespace core
}  // namespace heaptype

#endif
