#include "timeline.hpp"

#include <algorithm>

namespace heaptype {
namespace core {

Timeline::Timeline(size_t series, size_t max_points)
    : series_(series), max_points_(max_points < 2 ? 2 : max_points) {
  buckets_.resize(max_points_);
  values_.resize(max_points_ * (series_ + 1));
}

void Timeline::open(uint64_t index, uint64_t time, int64_t total) {
  // A bucket starts with the stacks as deep as they were last reported.
  buckets_[index] = Bucket{time, total, stack_now_};
  std::copy(scratch_.begin(), scratch_.end(), values_.begin() + static_cast<long>(index * (series_ + 1)));
}

// Twice as wide: each pair of buckets becomes one, keeping the higher of the two.
void Timeline::compress() {
  size_t stride = series_ + 1;
  uint64_t used = started_ ? current_ + 1 : 0;
  for (uint64_t k = 0; 2 * k < used; ++k) {
    uint64_t keep = 2 * k;
    if (2 * k + 1 < used && buckets_[2 * k + 1].total > buckets_[2 * k].total) keep = 2 * k + 1;
    int64_t stack = buckets_[2 * k].stack;
    if (2 * k + 1 < used) stack = std::max(stack, buckets_[2 * k + 1].stack);
    buckets_[k] = buckets_[keep];
    buckets_[k].stack = stack;
    std::copy_n(values_.begin() + static_cast<long>(keep * stride), stride, values_.begin() + static_cast<long>(k * stride));
  }
  current_ /= 2;
  width_ *= 2;
}

}  // namespace core
}  // namespace heaptype
