// context_index.hpp: finds a calling context's number by (thread, node, call site).
//
// A test suite's profile defines millions of contexts (a site per call path and size,
// and every test is a new path). A flat table of (number, hash tag) slots with linear
// probing costs 8 bytes a slot and no allocation per entry, where a node-based hash
// map took ~40 bytes, a malloc and a free per context and a third of the pass's time
// (cppcheck's testrunner profile: 12M contexts).
#ifndef HEAPTYPE_CORE_CONTEXT_INDEX_HPP
#define HEAPTYPE_CORE_CONTEXT_INDEX_HPP

#include <cstddef>
#include <cstdint>
#include <vector>

namespace heaptype {
namespace core {

class ContextIndex {
 public:
  static constexpr uint32_t kEmpty = UINT32_MAX;

  // The number stored under `hash` for which same(number) holds, else kEmpty; `*slot`
  // is where a new number goes (pass it to insert()).
  template <class Same>
  uint32_t find(uint64_t hash, Same&& same, size_t* slot) {
    if (slots_.empty()) {
      slots_.assign(kMinSlots, Slot{kEmpty, 0});
      mask_ = kMinSlots - 1;
    }
    uint32_t tag = static_cast<uint32_t>(hash >> 32);
    for (size_t i = static_cast<size_t>(hash) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.number == kEmpty) {
        *slot = i;
        return kEmpty;
      }
      if (s.tag == tag && same(s.number)) return s.number;
    }
  }

  // Stores `number` at the slot find() gave; `hash_of(number)` rehashes the numbers
  // stored when the table grows (it keeps at most half its slots full).
  template <class HashOf>
  void insert(size_t slot, uint64_t hash, uint32_t number, HashOf&& hash_of) {
    slots_[slot] = Slot{number, static_cast<uint32_t>(hash >> 32)};
    if (++used_ * 2 > slots_.size()) grow(&hash_of);
  }

  // Room for `count` numbers in all without growing on the way.
  template <class HashOf>
  void reserve(size_t count, HashOf&& hash_of) {
    size_t wanted = kMinSlots;
    while (wanted < count * 2) wanted *= 2;
    if (wanted > slots_.size()) rebuild(wanted, &hash_of);
  }

 private:
  struct Slot {
    uint32_t number;
    uint32_t tag;  // the hash's high half: most mismatches are told apart without the context
  };
  static constexpr size_t kMinSlots = 1024;

  template <class HashOf>
  void grow(HashOf* hash_of) {
    rebuild(slots_.size() * 2, hash_of);
  }

  template <class HashOf>
  void rebuild(size_t size, HashOf* hash_of) {
    std::vector<Slot> old(size, Slot{kEmpty, 0});
    old.swap(slots_);
    mask_ = size - 1;
    for (const Slot& s : old) {
      if (s.number == kEmpty) continue;
      uint64_t hash = (*hash_of)(s.number);
      size_t i = static_cast<size_t>(hash) & mask_;
      while (slots_[i].number != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t used_ = 0;
};

}  // namespace core
}  // namespace heaptype

#endif
