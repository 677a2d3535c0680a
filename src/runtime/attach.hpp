// attach.hpp: how the runtime came into the process, and `heaptype attach`.
//
// Linked (built with HeapType), preloaded (LD_PRELOAD into an unmodified program)
// or attached: `heaptype attach PID` has gdb call dlopen() on the shared runtime in
// the running process and then heaptype_attach(output). A library loaded that late
// interposes nothing, so the attach points the allocation entries of every loaded
// module's GOT at the runtime's (got_patch.hpp). Blocks allocated before it carry no
// header: their frees go to glibc as they are, counted as untracked frees.
//
// heaptype_detach() gives the allocation entries back and finishes the profile; the
// release entries (free, realloc, delete) stay the runtime's, since the blocks
// allocated while attached carry headers that glibc must never see.
#ifndef HEAPTYPE_RUNTIME_ATTACH_HPP
#define HEAPTYPE_RUNTIME_ATTACH_HPP

#include "../format/profile_format.hpp"

namespace heaptype {
namespace runtime {

// How the runtime entered this process, for the profile's header.
format::RuntimeMode entry_mode();
// The profile path an attach asked for, or null.
const char* attach_output();

}  // namespace runtime
}  // namespace heaptype

#endif
