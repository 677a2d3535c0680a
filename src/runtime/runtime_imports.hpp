// runtime_imports.hpp: what the preloaded runtime brings into a program that would not
// have it otherwise.
//
// libheaptype.so is C++: preloaded into a C program (or one that links its C++ library
// statically), it loads libstdc++.so, whose start-up allocates its emergency exception
// pool (72,704 B with GCC 12) before the program runs. That block is the profiler's,
// not the program's: counting it gave a C program a row, an allocation and a peak it
// does not have when it runs alone.
//
// Exact, not a guess by size: at start-up, the preloaded runtime reads the DT_NEEDED
// entries of every loaded object but its own. If none names libstdc++.so, the library
// is the runtime's alone, and an allocation called from its code before the runtime's
// own constructors run (the loader runs a library's constructors after those of the
// libraries it needs: libstdc++'s start-up comes first) is left out of the profile:
// it keeps its header, with the owner word of an untracked block (block_header.hpp),
// so that its free stays exact. Any other program, and any allocation libstdc++ makes
// later (for a C++ plugin the program dlopen()s), is counted as before.
#ifndef HEAPTYPE_RUNTIME_RUNTIME_IMPORTS_HPP
#define HEAPTYPE_RUNTIME_RUNTIME_IMPORTS_HPP

#include <cstdint>

namespace heaptype {
namespace runtime {

// [start, end) of libstdc++.so's mapping while its start-up, done for the runtime
// alone, may still allocate; both 0 otherwise.
extern uintptr_t g_import_start_up_begin;
extern uintptr_t g_import_start_up_end;

// At the runtime's start-up (on the process's first allocation): opens the window above
// if the runtime is preloaded and nothing else needs libstdc++.so.
void note_runtime_only_libraries();

// Whether an allocation called from `call_site` is the start-up of a library only the
// runtime needs: left out of the profile. Notes that one was.
bool runtime_import_allocation(uintptr_t call_site);

// Whether an allocation was left out so: libstdc++'s own release of it at exit
// (__gnu_cxx::__freeres) is then the runtime's business, not the profile's.
bool runtime_import_allocations_left_out();

}  // namespace runtime
}  // namespace heaptype

#endif
