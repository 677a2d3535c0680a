// fcontext_stacks.cpp: allocations on boost.context stacks (what PowerDNS Recursor's
// MTasker, folly's fibers and Boost.Asio's stackful coroutines use), for
// tests/python/test_coroutine_stacks.py. The bottom of each stack holds a return
// address into boost's make_fcontext (its `finish` label, which has no call frame
// information: the unwinder stops there).
//
//   fcontext_stacks N: a context on a stack from malloc runs coroutine_entry() >
//   serve() > make_reply(), which makes N typed `Reply` objects (each deleted), then
//   jumps back. Prints "done N backtraces=B" (B: the runtime's calls to _Unwind_Backtrace,
//   counted by the program's own, which forwards to libgcc's).
#include <boost/context/detail/fcontext.hpp>

#include <cstdio>
#include <cstdlib>

#include "count_backtraces.hpp"

namespace ctx = boost::context::detail;

struct Reply {
  long value[4];
};

namespace {
long g_count = 0;
volatile long g_sink = 0;
}  // namespace

__attribute__((noinline)) void make_reply() {
  Reply* r = new Reply{{1, 2, 3, 4}};
  g_sink = g_sink + r->value[2];
  delete r;
}
__attribute__((noinline)) void serve() {
  for (long i = 0; i < g_count; ++i) make_reply();
  asm volatile("");
}
void coroutine_entry(ctx::transfer_t from) {
  serve();
  ctx::jump_fcontext(from.fctx, nullptr);
}

int main(int argc, char** argv) {
  g_count = argc > 1 ? std::atol(argv[1]) : 1000;
  constexpr size_t kSize = 256 * 1024;
  char* stack = static_cast<char*>(std::malloc(kSize));
  ctx::fcontext_t context = ctx::make_fcontext(stack + kSize, kSize, coroutine_entry);
  ctx::jump_fcontext(context, nullptr);
  std::printf("done %ld backtraces=%lu\n", g_count, g_backtraces);
  return 0;
}
