#include "demangle.hpp"

#include <cxxabi.h>

#include <cstdlib>

namespace heaptype {
namespace core {

std::string demangle(const std::string& mangled) {
  int status = 0;
  char* name = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !name) return mangled;
  std::string out(name);
  std::free(name);
  return out;
}

}  // namespace core
}  // namespace heaptype
