#include "timeline.hpp"

#include <algorithm>

namespace heaptype {
namespace core {

Timeline::Timeline(size_t max_points) : max_points_(max_points < 2 ? 2 : max_points) {
  buckets_.resize(max_points_);
}

// Opens bucket `index` and any skipped before it; each starts, at its first tick, with
// what is live now (its highest moment until a higher one comes) and the stacks as
// deep as they were last reported.
void Timeline::open_up_to(uint64_t index, int64_t total) {
  uint64_t first = started_ ? current_ + 1 : index;
  for (uint64_t k = first; k <= index; ++k) buckets_[k] = Bucket{k * width_, total, stack_now_};
  started_ = true;
  current_ = index;
  for (uint32_t id : dirty_) series_[id].dirty = false;
  dirty_.clear();
}

void Timeline::settle() {
  for (uint32_t id : dirty_) {
    Series& s = series_[id];
    s.entries.back().at_high = s.now;
    s.dirty = false;
  }
  dirty_.clear();
}

// Twice as wide: each pair of buckets becomes one, keeping the higher of the two.
void Timeline::compress() {
  uint64_t used = started_ ? current_ + 1 : 0;
  keep_odd_.assign((used + 1) / 2, 0);
  for (uint64_t k = 0; 2 * k < used; ++k) {
    uint64_t even = 2 * k, odd = 2 * k + 1;
    bool odd_higher = odd < used && buckets_[odd].total > buckets_[even].total;
    int64_t stack = buckets_[even].stack;
    if (odd < used) stack = std::max(stack, buckets_[odd].stack);
    keep_odd_[k] = odd_higher;
    buckets_[k] = buckets_[odd_higher ? odd : even];
    buckets_[k].stack = stack;
  }
  for (Series& s : series_) compress_series(&s);
  current_ /= 2;
  width_ *= 2;
  // The current bucket's high may now be the earlier half's: every group whose bytes
  // differ from that moment's must be rewritten at the next high.
  dirty_.clear();
  for (uint32_t id = 0; id < series_.size(); ++id) {
    Series& s = series_[id];
    s.dirty = !s.entries.empty() && s.entries.back().bucket == current_ && s.entries.back().at_high != s.now;
    if (s.dirty) dirty_.push_back(id);
  }
}

// A group's entries of buckets 2k and 2k+1 become one entry of bucket k: its bytes at
// the kept half's high, and at the later half's end.
void Timeline::compress_series(Series* s) const {
  std::vector<Entry>& entries = s->entries;
  size_t out = 0;
  int64_t carried = 0;  // the group's bytes when the merged bucket began
  for (size_t i = 0; i < entries.size();) {
    uint32_t k = entries[i].bucket / 2;
    const Entry* even = entries[i].bucket % 2 == 0 ? &entries[i] : nullptr;
    const Entry* odd = even ? nullptr : &entries[i];
    ++i;
    if (even && i < entries.size() && entries[i].bucket == 2 * k + 1) odd = &entries[i++];
    Entry merged{k, 0, odd ? odd->at_end : even->at_end};
    if (keep_odd_[k])
      merged.at_high = odd ? odd->at_high : even ? even->at_end : carried;
    else
      merged.at_high = even ? even->at_high : carried;
    carried = merged.at_end;
    entries[out++] = merged;
  }
  entries.resize(out);
}

std::vector<int64_t> Timeline::series(uint32_t id) const {
  std::vector<int64_t> out(points(), 0);
  if (id >= series_.size()) return out;
  int64_t carried = 0;
  size_t next = 0;
  const std::vector<Entry>& entries = series_[id].entries;
  for (size_t k = 0; k < out.size(); ++k) {
    if (next < entries.size() && entries[next].bucket == k) {
      out[k] = entries[next].at_high;
      carried = entries[next].at_end;
      ++next;
    } else {
      out[k] = carried;
    }
  }
  return out;
}

}  // namespace core
}  // namespace heaptype
