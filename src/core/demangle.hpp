// demangle.hpp: C++ symbol names through the ABI's own demangler.
#ifndef HEAPTYPE_CORE_DEMANGLE_HPP
#define HEAPTYPE_CORE_DEMANGLE_HPP

#include <string>

namespace heaptype {
namespace core {

// The demangled name, or `mangled` unchanged when it is not a C++ name.
std::string demangle(const std::string& mangled);

}  // namespace core
}  // namespace heaptype

#endif
