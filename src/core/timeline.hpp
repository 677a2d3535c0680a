// timeline.hpp: live bytes over time, stacked by group, in at most `max_points`
// buckets. A bucket keeps the moment its total was highest and what each group held
// then, so the stacked series reach the exact peak, at its time. Buckets start one
// clock tick wide and double (merging pairs, the higher of each pair kept) whenever
// there would be too many: one pass, memory fixed by max_points.
#ifndef HEAPTYPE_CORE_TIMELINE_HPP
#define HEAPTYPE_CORE_TIMELINE_HPP

#include <cstddef>
#include <cstdint>
#include <vector>

namespace heaptype {
namespace core {

class Timeline {
 public:
  // `series`: the groups followed; one more series holds the rest ("other").
  Timeline(size_t series, size_t max_points);

  // Before each event at `time`: opens the bucket of `time`; the state carried into
  // it (and into any bucket skipped) is the one `read` gives now.
  template <class Read>
  void before(uint64_t time, Read&& read) {
    uint64_t index = time / width_;
    while (index >= max_points_) {
      compress();
      index = time / width_;
    }
    if (started_ && index <= current_) return;
    int64_t total = 0;
    scratch_.assign(series_ + 1, 0);
    total = read(scratch_.data());
    if (!started_) {
      started_ = true;
      current_ = index;
      open(index, time, total);
      return;
    }
    for (uint64_t k = current_ + 1; k <= index; ++k) open(k, k == index ? time : k * width_, total);
    current_ = index;
  }

  // After each event: the total now; the groups' values are read only when the
  // bucket reaches a new high.
  template <class Read>
  void after(uint64_t time, int64_t total, Read&& read) {
    Bucket& b = buckets_[current_];
    if (total <= b.total) return;
    b.total = total;
    b.time = time;
    read(&values_[current_ * (series_ + 1)]);
  }

  // The threads' stacks together went `bytes` deep in the current bucket.
  void stack(int64_t bytes) {
    stack_now_ = bytes;
    if (started_ && bytes > buckets_[current_].stack) buckets_[current_].stack = bytes;
  }

  size_t series() const { return series_; }
  size_t points() const { return started_ ? current_ + 1 : 0; }
  uint64_t time(size_t point) const { return buckets_[point].time; }
  int64_t total(size_t point) const { return buckets_[point].total; }
  int64_t stack(size_t point) const { return buckets_[point].stack; }  // deepest in the bucket
  int64_t value(size_t point, size_t series) const { return values_[point * (series_ + 1) + series]; }

 private:
  struct Bucket {
    uint64_t time;  // of the highest total in the bucket
    int64_t total;
    int64_t stack;  // the deepest the stacks went in it (STACK records)
  };
  void open(uint64_t index, uint64_t time, int64_t total);
  void compress();

  size_t series_;
  uint64_t max_points_;
  uint64_t width_ = 1;  // clock ticks per bucket
  bool started_ = false;
  uint64_t current_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<int64_t> values_;  // [bucket][series + 1], the last series is "other"
  std::vector<int64_t> scratch_;
  int64_t stack_now_ = 0;
};

}  // namespace core
}  // namespace heaptype

#endif
