#include "demangle.hpp"

#include <cxxabi.h>

#include <cstdlib>

#ifdef HEAPTYPE_HAVE_LIBIBERTY
#include <libiberty/demangle.h>
#endif

namespace heaptype {
namespace core {

namespace {

std::string taken(char* name) {
  std::string out(name);
  std::free(name);
  return out;
}

}  // namespace

// The C++ runtime's demangler first; where it gives up, binutils' (libiberty, when the
// core was built with it): GCC 12's refuses generic lambdas with a parameter pack
// (`{lambda(auto:1&, (auto:2&&)...)#7}`, kj's test runner), which c++filt names.
std::string demangle(const std::string& mangled) {
  int status = 0;
  if (char* name = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status); name && status == 0)
    return taken(name);
#ifdef HEAPTYPE_HAVE_LIBIBERTY
  if (char* name = cplus_demangle(mangled.c_str(), DMGL_PARAMS | DMGL_ANSI | DMGL_TYPES)) return taken(name);
#endif
  return mangled;
}

bool demangles_with_libiberty() {
#ifdef HEAPTYPE_HAVE_LIBIBERTY
  return true;
#else
  return false;
#endif
}

}  // namespace core
}  // namespace heaptype
