// context_index.hpp: finds a calling context's number by (thread, node, call site).
//
// A test suite's profile defines millions of contexts (a site per call path and size,
// and every test is a new path). A flat table of (number, hash) slots with linear
// probing costs 8 bytes a slot and no allocation per entry, where a node-based hash
// map took ~40 bytes, a malloc and a free per context and a third of the pass's time
// (cppcheck's testrunner profile: 12M contexts). A slot keeps 32 bits of the hash,
// which also place it: growing the table never reads the contexts again.
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
    if (slots_.empty()) rebuild(kMinSlots);
    uint32_t kept = kept_hash(hash);
    for (size_t i = kept & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.number == kEmpty) {
        *slot = i;
        return kEmpty;
      }
      if (s.hash == kept && same(s.number)) return s.number;
    }
  }

  // Stores `number` at the slot find() gave (the table keeps at most half its slots full).
  void insert(size_t slot, uint64_t hash, uint32_t number) {
    slots_[slot] = Slot{number, kept_hash(hash)};
    if (++used_ * 2 > slots_.size()) rebuild(slots_.size() * 2);
  }

  // Room for `count` numbers in all without growing on the way.
  void reserve(size_t count) {
    size_t wanted = kMinSlots;
    while (wanted < count * 2) wanted *= 2;
    if (wanted > slots_.size()) rebuild(wanted);
  }

 private:
  struct Slot {
    uint32_t number;
    uint32_t hash;  // kept_hash(): the probe's start, and most mismatches told apart without the context
  };
  static constexpr size_t kMinSlots = 1024;

  static uint32_t kept_hash(uint64_t hash) { return static_cast<uint32_t>(hash >> 32); }

  void rebuild(size_t size) {
    std::vector<Slot> old(size, Slot{kEmpty, 0});
    old.swap(slots_);
    mask_ = size - 1;
    for (const Slot& s : old) {
      if (s.number == kEmpty) continue;
      size_t i = s.hash & mask_;
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
