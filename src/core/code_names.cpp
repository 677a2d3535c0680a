#include "code_names.hpp"

namespace heaptype {
namespace core {

const CodeInfo& TableCodeNames::lookup(std::unordered_map<uint64_t, CodeInfo>& table, uint64_t address) {
  CodeInfo& info = table[address];
  info.address = address;
  return info;
}

}  // namespace core
}  // namespace heaptype
