// string_table.hpp: interned strings (function, type, file and module names), so
// that paths and trees compare names by number.
#ifndef HEAPTYPE_CORE_STRING_TABLE_HPP
#define HEAPTYPE_CORE_STRING_TABLE_HPP

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

namespace heaptype {
namespace core {

class StringTable {
 public:
  StringTable() { intern(""); }  // id 0 is the empty string
  // Moving keeps the deque's strings where they are; a copy's keys would view the original's.
  StringTable(StringTable&&) = default;
  StringTable& operator=(StringTable&&) = default;
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;

  uint32_t intern(std::string_view text) {
    auto it = ids_.find(text);
    if (it != ids_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(strings_.size());
    strings_.emplace_back(text);
    ids_.emplace(strings_.back(), id);
    return id;
  }
  const std::string& get(uint32_t id) const { return strings_[id]; }
  void reserve(size_t count) { ids_.reserve(count); }
  size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;  // a deque: references stay valid, and the keys below view them
  std::unordered_map<std::string_view, uint32_t> ids_;
};

}  // namespace core
}  // namespace heaptype

#endif
