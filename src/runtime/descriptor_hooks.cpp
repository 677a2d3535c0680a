// descriptor_hooks.cpp: the close family, replaced so that the program never closes or
// replaces the profile's descriptor under the runtime.
//
// A daemon closes every descriptor it did not open (a loop of close(), closefrom(),
// close_range()) and then opens files of its own, which take the lowest free numbers:
// the profile's among them. The runtime went on writing its chunks there, into the
// program's own file. Each function here lets the writer move the profile's descriptor
// out of the way first (a duplicate outside the range: the program's call then closes
// or replaces the old number), or open the profile again after the call when no number
// outside the range is free (profile_writer.hpp, writer_around_closing). The program's
// call does what it did before, with the same result. A descriptor closed past these
// (the raw system call) is caught before the next write: the writer checks that its
// descriptor still holds the profile's file.
#include <unistd.h>

#include <climits>
#include <tuple>
#include <type_traits>

#include "libc_next.hpp"
#include "profile_writer.hpp"

namespace rt = heaptype::runtime;

namespace {

using Close = int (*)(int);
using CloseRange = int (*)(unsigned, unsigned, int);
using Closefrom = void (*)(int);
using Dup2 = int (*)(int, int);
using Dup3 = int (*)(int, int, int);

Close g_close;
CloseRange g_close_range;
Closefrom g_closefrom;
Dup2 g_dup2;
Dup3 g_dup3;

// close_range's flag that only marks the descriptors close-on-exec (the profile's is).
constexpr int kCloseRangeCloexec = 1 << 2;

// Calls `real(args...)`, which closes or replaces descriptors first..last, around the
// writer's care for the profile's descriptor.
template <class Function, class... Args>
int closing(unsigned first, unsigned last, Function real, Args... args) {
  struct Pending {
    Function real;
    std::tuple<Args...> args;
  } pending{real, {args...}};
  auto run = [](void* context) -> int {
    Pending* p = static_cast<Pending*>(context);
    if constexpr (std::is_void_v<decltype(std::apply(p->real, p->args))>) {
      std::apply(p->real, p->args);
      return 0;
    } else {
      return std::apply(p->real, p->args);
    }
  };
  return rt::writer_around_closing(first, last, run, &pending);
}

unsigned number(int fd) { return static_cast<unsigned>(fd); }

}  // namespace

HEAPTYPE_LIBC_EXPORT int close(int fd) {
  Close real = rt::next_definition(&g_close, "close");
  if (!real) return rt::unavailable();
  return fd < 0 ? real(fd) : closing(number(fd), number(fd), real, fd);
}

HEAPTYPE_LIBC_EXPORT int close_range(unsigned first, unsigned last, int flags) noexcept {
  CloseRange real = rt::next_definition(&g_close_range, "close_range");
  if (!real) return rt::unavailable();
  if (flags & kCloseRangeCloexec) return real(first, last, flags);
  return closing(first, last, real, first, last, flags);
}

HEAPTYPE_LIBC_EXPORT void closefrom(int lowest) noexcept {
  Closefrom real = rt::next_definition(&g_closefrom, "closefrom");
  if (real) closing(lowest < 0 ? 0u : number(lowest), UINT_MAX, real, lowest);
}

HEAPTYPE_LIBC_EXPORT int dup2(int from, int to) noexcept {
  Dup2 real = rt::next_definition(&g_dup2, "dup2");
  if (!real) return rt::unavailable();
  return from == to || to < 0 ? real(from, to) : closing(number(to), number(to), real, from, to);
}

HEAPTYPE_LIBC_EXPORT int dup3(int from, int to, int flags) noexcept {
  Dup3 real = rt::next_definition(&g_dup3, "dup3");
  if (!real) return rt::unavailable();
  return to < 0 ? real(from, to, flags) : closing(number(to), number(to), real, from, to, flags);
}
