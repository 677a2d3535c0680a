// count_backtraces.hpp: a test program that includes this counts the runtime's calls to
// the unwinder's _Unwind_Backtrace in g_backtraces: it exports its own, which forwards to
// libgcc's (the runtime linked in binds to it; a preloaded one finds it first when the
// program is linked with -rdynamic). Link with -ldl.
#ifndef HEAPTYPE_TESTS_COUNT_BACKTRACES_HPP
#define HEAPTYPE_TESTS_COUNT_BACKTRACES_HPP

#include <dlfcn.h>
#include <unwind.h>

static unsigned long g_backtraces = 0;

extern "C" _Unwind_Reason_Code _Unwind_Backtrace(_Unwind_Trace_Fn trace, void* argument) {
  using Real = _Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void*);
  static Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "_Unwind_Backtrace"));
  ++g_backtraces;
  return real(trace, argument);
}

#endif
