// demangle.hpp: C++ symbol names through the ABI's own demangler, and binutils'
// where that one gives up.
#ifndef HEAPTYPE_CORE_DEMANGLE_HPP
#define HEAPTYPE_CORE_DEMANGLE_HPP

#include <string>

namespace heaptype {
namespace core {

// The demangled name, or `mangled` unchanged when it is not a C++ name.
std::string demangle(const std::string& mangled);

// Whether binutils' demangler backs the C++ runtime's (the core was built with libiberty).
bool demangles_with_libiberty();

}  // namespace core
}  // namespace heaptype

#endif
