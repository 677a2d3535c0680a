#include "code_names.hpp"

namespace heaptype {
namespace core {

const CodeInfo& TableCodeNames::lookup(std::unordered_map<uint64_t, CodeInfo>& table, uint64_t address) {
  CodeInfo& info = table[address];
  info.address = address;
  return info;
}

std::string SymbolizerCodeNames::type_name(uint64_t tag) {
  auto known = types_.find(tag);
  if (known != types_.end()) return known->second;
  std::unordered_map<uint64_t, std::string> found = symbolizer_->type_names({tag});
  return types_.emplace(tag, found[tag]).first->second;
}

}  // namespace core
}  // namespace heaptype
