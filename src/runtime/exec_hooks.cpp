// exec_hooks.cpp: the exec family, replaced so that a process finishes its profile
// before its image is replaced.
//
// execve() keeps the process and drops its memory: no exit, no destructors, so a
// process that execs another program (env, a shell's last command, a compiler
// driver, a launcher) would leave a profile without its end, and an aggregated one
// without any counts. Each function here finishes the profile (control.cpp,
// finish_before_exec) and then calls the C library's own. If the exec fails the
// process goes on: what it does next is written after the profile's end, as after
// exit.
//
// glibc's execl*, execv* and execvp* call its execve internally, past any
// interposition: each is replaced on its own. The variadic ones gather their
// arguments and go through the array forms.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>

#include "libc_next.hpp"
#include "tracker.hpp"

namespace rt = heaptype::runtime;

namespace {

using Execve = int (*)(const char*, char* const[], char* const[]);
using Execv = int (*)(const char*, char* const[]);
using Fexecve = int (*)(int, char* const[], char* const[]);

Execve g_execve, g_execvpe;
Execv g_execv, g_execvp;
Fexecve g_fexecve;

// How many arguments execl's list holds, `first` and the null pointer included.
size_t listed(const char* first, va_list args) {
  size_t n = 1;
  for (const char* arg = first; arg != nullptr; arg = va_arg(args, const char*)) ++n;
  return n;
}

// The list as an argv array (`n` from listed()); `envp`: set to the pointer after the
// null one (execle).
void gather(const char* first, va_list args, char** argv, size_t n, char*** envp) {
  argv[0] = const_cast<char*>(first);
  for (size_t i = 1; i < n; ++i) argv[i] = first ? va_arg(args, char*) : nullptr;
  if (envp) *envp = va_arg(args, char**);
}

}  // namespace

// Finishes the profile, then calls the C library's `name` (found once into `cached`).
template <class Function, class... Args>
int finish_then(Function* cached, const char* name, Args... args) {
  return rt::call_next_after(cached, name, rt::finish_before_exec, args...);
}

HEAPTYPE_LIBC_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return finish_then(&g_execve, "execve", path, argv, envp);
}

HEAPTYPE_LIBC_EXPORT int execv(const char* path, char* const argv[]) {
  return finish_then(&g_execv, "execv", path, argv);
}

HEAPTYPE_LIBC_EXPORT int execvp(const char* file, char* const argv[]) {
  return finish_then(&g_execvp, "execvp", file, argv);
}

HEAPTYPE_LIBC_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return finish_then(&g_execvpe, "execvpe", file, argv, envp);
}

HEAPTYPE_LIBC_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  return finish_then(&g_fexecve, "fexecve", fd, argv, envp);
}

// As glibc's own: the array on the stack, as long as the list.
#define HEAPTYPE_GATHER(first, argv, envp)       \
  va_list args;                                   \
  va_start(args, first);                          \
  va_list counting;                               \
  va_copy(counting, args);                        \
  size_t n = listed(first, counting);             \
  va_end(counting);                               \
  char* argv[n];                                  \
  gather(first, args, argv, n, envp);             \
  va_end(args)

HEAPTYPE_LIBC_EXPORT int execl(const char* path, const char* arg, ...) {
  HEAPTYPE_GATHER(arg, argv, nullptr);
  return execv(path, argv);
}

HEAPTYPE_LIBC_EXPORT int execlp(const char* file, const char* arg, ...) {
  HEAPTYPE_GATHER(arg, argv, nullptr);
  return execvp(file, argv);
}

HEAPTYPE_LIBC_EXPORT int execle(const char* path, const char* arg, ...) {
  char** envp = nullptr;
  HEAPTYPE_GATHER(arg, argv, &envp);
  return execve(path, argv, envp);
}
