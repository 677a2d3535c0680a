#include "code_names.hpp"

#include <cstdio>

namespace heaptype {
namespace core {
namespace {

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string CodeInfo::name() const {
  if (!function.empty()) return function;
  if (!module.empty()) return base_name(module) + "+" + hex(module_offset);
  return hex(address);
}

const CodeInfo& TableCodeNames::lookup(std::unordered_map<uint64_t, CodeInfo>& table, uint64_t address) {
  CodeInfo& info = table[address];
  info.address = address;
  return info;
}

}  // namespace core
}  // namespace heaptype
