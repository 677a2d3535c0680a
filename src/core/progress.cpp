#include "progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace heaptype {
namespace core {
namespace {

constexpr double kUpdateInterval = 0.1;  // seconds between two updates of a running task

void write_stderr(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) return;  // progress is a courtesy: never fail the work for it
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string progress_text(const ProgressEvent& event) {
  char tail[64];
  if (event.finished)
    std::snprintf(tail, sizeof tail, "done in %.1f s", event.seconds);
  else if (event.fraction >= 0)
    std::snprintf(tail, sizeof tail, "%d%%", static_cast<int>(event.fraction * 100));
  else
    std::snprintf(tail, sizeof tail, "%s", event.detail.c_str());
  return "heaptype: " + event.task + "... " + tail;
}

ProgressFn stderr_progress() {
  const bool terminal = isatty(STDERR_FILENO) == 1;
  return [terminal](const ProgressEvent& event) {
    if (terminal)
      write_stderr("\r\033[K" + progress_text(event) + (event.finished ? "\n" : ""));
    else if (event.finished)
      write_stderr(progress_text(event) + "\n");
  };
}

ProgressTask::ProgressTask(ProgressFn report, std::string task, double delay, double already)
    : report_(std::move(report)),
      task_(std::move(task)),
      delay_(delay),
      started_(Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(already))) {}

double ProgressTask::elapsed() const {
  return std::chrono::duration<double>(Clock::now() - started_).count();
}

void ProgressTask::emit(double fraction, const std::string& detail, bool finished) {
  ProgressEvent event;
  event.task = task_;
  event.fraction = fraction;
  event.detail = detail;
  event.seconds = elapsed();
  event.finished = finished;
  last_emit_ = event.seconds;
  shown_ = true;
  report_(event);
}

void ProgressTask::update(double fraction, const std::string& detail) {
  last_fraction_ = fraction;
  last_detail_ = detail;
  if (finished_ || !report_) return;
  double now = elapsed();
  if (now < delay_ || (shown_ && now - last_emit_ < kUpdateInterval)) return;
  emit(fraction, detail, false);
}

void ProgressTask::finish() {
  if (finished_) return;
  finished_ = true;
  if (report_ && (shown_ || elapsed() >= delay_)) emit(last_fraction_ < 0 ? -1 : 1.0, last_detail_, true);
}

}  // namespace core
}  // namespace heaptype
