// count_backtraces.hpp: a test program that includes this counts the runtime's calls to
// the unwinder's _Unwind_Backtrace in g_backtraces, and to _Unwind_Find_FDE (each read
// of a function's call frame information, src/runtime/call_frame_info.cpp) in
// g_fde_lookups: it exports its own, which forward to libgcc's (the runtime linked in
// binds to them; a preloaded one finds them first when the program is linked with
// -rdynamic; the unwinder's own lookups stay inside libgcc). Link with -ldl.
#ifndef HEAPTYPE_TESTS_COUNT_BACKTRACES_HPP
#define HEAPTYPE_TESTS_COUNT_BACKTRACES_HPP

#include <dlfcn.h>
#include <unwind.h>

static unsigned long g_backtraces = 0;
static unsigned long g_fde_lookups = 0;

extern "C" const void* _Unwind_Find_FDE(const void* pc, struct dwarf_eh_bases* bases) {
  using Real = const void* (*)(const void*, struct dwarf_eh_bases*);
  static Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "_Unwind_Find_FDE"));
  ++g_fde_lookups;
  return real(pc, bases);
}

extern "C" _Unwind_Reason_Code _Unwind_Backtrace(_Unwind_Trace_Fn trace, void* argument) {
  using Real = _Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void*);
  static Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "_Unwind_Backtrace"));
  ++g_backtraces;
  return real(trace, argument);
}

#endif
