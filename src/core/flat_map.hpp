// flat_map.hpp: an open-addressing hash map from 64-bit keys, for the live blocks
// of a profile (millions of inserts and erases per second of profiled run).
#ifndef HEAPTYPE_CORE_FLAT_MAP_HPP
#define HEAPTYPE_CORE_FLAT_MAP_HPP

#include <cstddef>
#include <cstdint>
#include <vector>

namespace heaptype {
namespace core {

// Keys must not be ~0 (the empty marker).
template <class V>
class FlatMap {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  FlatMap() { rehash(64); }

  V* find(uint64_t key) {
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

  void insert(uint64_t key, const V& value) {
    if ((size_ + 1) * 4 > keys_.size() * 3) rehash(keys_.size() * 2);
    size_t i = slot(key);
    while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask_;
    if (keys_[i] == kEmpty) ++size_;
    keys_[i] = key;
    values_[i] = value;
  }

  bool erase(uint64_t key, V* out) {
    size_t i = slot(key);
    for (;; i = (i + 1) & mask_) {
      if (keys_[i] == kEmpty) return false;
      if (keys_[i] == key) break;
    }
    if (out) *out = values_[i];
    // Backward-shift deletion keeps probe runs tombstone-free.
    size_t hole = i;
    for (size_t j = (hole + 1) & mask_; keys_[j] != kEmpty; j = (j + 1) & mask_) {
      size_t home = slot(keys_[j]);
      bool home_between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!home_between) {
        keys_[hole] = keys_[j];
        values_[hole] = values_[j];
        hole = j;
      }
    }
    keys_[hole] = kEmpty;
    --size_;
    return true;
  }

  size_t size() const { return size_; }

  template <class F>
  void for_each(F&& visit) const {
    for (size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] != kEmpty) visit(keys_[i], values_[i]);
  }

 private:
  size_t slot(uint64_t key) const {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h ^ (h >> 32)) & mask_;
  }

  void rehash(size_t capacity) {
    std::vector<uint64_t> old_keys(capacity, kEmpty);
    std::vector<V> old_values(capacity);
    old_keys.swap(keys_);
    old_values.swap(values_);
    mask_ = capacity - 1;
    size_ = 0;
    for (size_t i = 0; i < old_keys.size(); ++i)
      if (old_keys[i] != kEmpty) insert(old_keys[i], old_values[i]);
  }

  std::vector<uint64_t> keys_;
  std::vector<V> values_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace core
}  // namespace heaptype

#endif
