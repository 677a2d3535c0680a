// child_environment.hpp: what the processes this one starts inherit from it.
//
// `heaptype run` preloads the runtime into a program built without HeapType and, as
// heaptrack, memray and bytehound do, profiles that process and nothing else: the
// programs it execs (a build tool's compilers, `uname`) run without the runtime, so
// they print nothing of it and write no profile. The runner says so with
// HEAPTYPE_CHILDREN=unprofiled (--follow-children: =profiled, and the children keep
// the runtime). Without the variable (a program linked with the runtime, or preloaded
// by hand) every process keeps what it inherited, as before.
#ifndef HEAPTYPE_RUNTIME_CHILD_ENVIRONMENT_HPP
#define HEAPTYPE_RUNTIME_CHILD_ENVIRONMENT_HPP

namespace heaptype {
namespace runtime {

// Under HEAPTYPE_CHILDREN=unprofiled: takes libheaptype.so out of LD_PRELOAD and
// clears the variable, so that the processes this one execs do not load the runtime.
// Called once, at start-up (the first allocation, possibly before main()).
void keep_children_unprofiled_if_asked();

}  // namespace runtime
}  // namespace heaptype

#endif
