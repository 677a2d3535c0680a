// got_patch.hpp: pointing loaded modules' GOT entries at the runtime's functions.
//
// What LD_PRELOAD does at start-up, done to a running process: every module's
// relocations (PLT and GLOB_DAT) naming an allocation function get the runtime's
// definition written to their slot. Slots in RELRO pages are made writable for the
// write and read-only again. Modules loaded after the patch are not patched.
#ifndef HEAPTYPE_RUNTIME_GOT_PATCH_HPP
#define HEAPTYPE_RUNTIME_GOT_PATCH_HPP

#include <cstddef>

namespace heaptype {
namespace runtime {

enum class HookGroup {
  kRelease,   // free, realloc, delete...: handle blocks with and without headers
  kAllocate,  // malloc, operator new...: give blocks headers
};

// Points every loaded module's slots for the group's functions at ours (found in
// the runtime library `self`, a dlopen handle); returns the slots written.
size_t patch_hooks(void* self, HookGroup group);
// Writes back what patch_hooks(kAllocate) replaced.
void restore_allocation_hooks();

}  // namespace runtime
}  // namespace heaptype

#endif
