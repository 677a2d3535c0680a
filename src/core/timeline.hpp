// timeline.hpp: live bytes over time of every group of a grouping, in at most
// `max_points` buckets, in one pass. A bucket keeps the moment its total was highest
// and what each group held then, so stacked series reach the exact peak, at its time.
// Buckets start one clock tick wide and double (merging pairs, the higher of each
// pair kept) whenever there would be too many.
//
// Every group is followed, so the caller can pick the series to show (say the top
// ten by peak) after the pass, from the same pass. Memory stays small because a
// group is stored only in the buckets in which it changed: an entry holds its bytes
// at the bucket's highest moment and at the bucket's end; a bucket without an entry
// carries the end of the group's previous entry. A new high of a bucket rewrites only
// the groups changed since the bucket's previous high (the dirty list).
#ifndef HEAPTYPE_CORE_TIMELINE_HPP
#define HEAPTYPE_CORE_TIMELINE_HPP

#include <cstddef>
#include <cstdint>
#include <vector>

namespace heaptype {
namespace core {

class Timeline {
 public:
  explicit Timeline(size_t max_points);

  // Before each event at `time`: opens the bucket of `time`. `total` is what is live
  // now, carried into it and into any bucket skipped.
  void before(uint64_t time, int64_t total) {
    uint64_t index = time / width_;
    while (index >= max_points_) {
      compress();
      index = time / width_;
    }
    if (started_ && index <= current_) return;
    open_up_to(index, total);
  }

  // During an event: group `series` holds `bytes` now.
  void change(uint32_t series, int64_t bytes) {
    if (series >= series_.size()) series_.resize(series + 1);
    Series& s = series_[series];
    if (s.entries.empty() || s.entries.back().bucket != current_)
      s.entries.push_back(Entry{static_cast<uint32_t>(current_), s.now, bytes});
    else
      s.entries.back().at_end = bytes;
    s.now = bytes;
    if (!s.dirty) {
      s.dirty = true;
      dirty_.push_back(series);
    }
  }

  // After each event: the total now. At a new high of the bucket, the groups changed
  // since its previous high take their bytes of now.
  void after(uint64_t time, int64_t total) {
    Bucket& b = buckets_[current_];
    if (total <= b.total) return;
    b.total = total;
    b.time = time;
    settle();
  }

  // The threads' stacks together went `bytes` deep in the current bucket.
  void stack(int64_t bytes) {
    stack_now_ = bytes;
    if (started_ && bytes > buckets_[current_].stack) buckets_[current_].stack = bytes;
  }

  size_t points() const { return started_ ? current_ + 1 : 0; }
  uint64_t time(size_t point) const { return buckets_[point].time; }
  int64_t total(size_t point) const { return buckets_[point].total; }
  int64_t stack(size_t point) const { return buckets_[point].stack; }  // deepest in the bucket
  // One group's bytes at each point (0 for a group never met).
  std::vector<int64_t> series(uint32_t id) const;

 private:
  struct Bucket {
    uint64_t time;  // of the highest total in the bucket
    int64_t total;
    int64_t stack;  // the deepest the stacks went in it (STACK records)
  };
  struct Entry {
    uint32_t bucket;
    int64_t at_high;  // the group's bytes at the bucket's highest moment
    int64_t at_end;   // and when the bucket ended (or now)
  };
  struct Series {
    std::vector<Entry> entries;  // in bucket order, one per bucket it changed in
    int64_t now = 0;
    bool dirty = false;  // changed since the current bucket's high
  };
  void open_up_to(uint64_t index, int64_t total);
  void settle();
  void compress();
  void compress_series(Series* s) const;

  uint64_t max_points_;
  uint64_t width_ = 1;  // clock ticks per bucket
  bool started_ = false;
  uint64_t current_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<Series> series_;
  std::vector<uint32_t> dirty_;
  std::vector<uint8_t> keep_odd_;  // compress(): the later of each pair was higher
  int64_t stack_now_ = 0;
};

}  // namespace core
}  // namespace heaptype

#endif
