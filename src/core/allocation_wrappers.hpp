// allocation_wrappers.hpp: functions that only pass an allocation on to malloc.
//
// Programs built without HeapType allocate through wrappers of their own: libiberty's
// and gnulib's xmalloc family (GCC, gdb, binutils, Squid, git), GLib's g_malloc family,
// LLVM's safe_malloc, a program's own operator new that calls malloc (gdb). The
// function that called the allocator is then the wrapper, for most of the heap (GCC:
// xmalloc, xrealloc and xcalloc 96% of its untyped bytes), which tells a reader
// nothing; the wrapper's caller does.
#ifndef HEAPTYPE_CORE_ALLOCATION_WRAPPERS_HPP
#define HEAPTYPE_CORE_ALLOCATION_WRAPPERS_HPP

#include <string>

namespace heaptype {
namespace core {

// `function`: a demangled name without its parameters ("xmalloc", "llvm::safe_malloc",
// "operator new").
bool is_allocation_wrapper(const std::string& function);

}  // namespace core
}  // namespace heaptype

#endif
