#include "location.hpp"

#include <cstdio>

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
  if (!module.empty()) {
    size_t slash = module.rfind('/');
    return module.substr(slash == std::string::npos ? 0 : slash + 1) + "+" + hex(module_offset);
  }
  return hex(address);
}

}  // namespace symbolize
}  // namespace heaptype
