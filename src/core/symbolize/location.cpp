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
  // A function without a name (a stripped program's): its start, where the call frame
  // information gives it, so that its frames are one function; else the address's own.
  if (!module.empty()) return base_name(module) + "+" + hex(function_address ? start_offset() : module_offset);
  return hex(address);
}

uint64_t Location::start_offset() const { return function_address - (address - module_offset); }

}  // namespace symbolize
}  // namespace heaptype
