// libc_next.hpp: the C library's own definition of a function the runtime replaces
// (the exec family, the close family, the set*id family), for the replacement to call
// after its own work.
#ifndef HEAPTYPE_RUNTIME_LIBC_NEXT_HPP
#define HEAPTYPE_RUNTIME_LIBC_NEXT_HPP

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace heaptype {
namespace runtime {

// The next definition of `name` after this object's (the C library's, or a sanitizer's
// in front of it), looked up once into `*cached`.
template <class Function>
Function next_definition(Function* cached, const char* name) {
  if (!*cached) *cached = reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
  return *cached;
}

// Runs `before()`, then the C library's `name` with `args` (ENOSYS when there is none):
// the exec family finishes the profile first, the set*id family opens it.
template <class Function, class... Args>
int call_next_after(Function* cached, const char* name, void (*before)(), Args... args) {
  Function real = next_definition(cached, name);
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  before();
  return real(args...);
}

// Closes one of the runtime's own descriptors, past the program's close() (which the
// runtime replaces: descriptor_hooks.cpp).
inline int close_own(int fd) { return static_cast<int>(syscall(SYS_close, fd)); }

// What a replacement returns when the C library has no such function.
inline int unavailable() {
  errno = ENOSYS;
  return -1;
}

}  // namespace runtime
}  // namespace heaptype

#define HEAPTYPE_LIBC_EXPORT extern "C" __attribute__((visibility("default")))

#endif
