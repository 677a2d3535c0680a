#include "location.hpp"

#include <cstdio>

#include "module_map.hpp"

namespace heaptype {
namespace symbolize {
namespace {

std::string hex(uint64_t value) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "0x%llx", static_cast<unsigned long long>(value));
  return buffer;
}

}  // namespace

std::string Location::name() const {
  if (!function.empty()) return function;
  if (!module.empty()) return base_name(module) + "+" + hex(module_offset);
  return hex(address);
}

}  // namespace symbolize
}  // namespace heaptype
