// coroutine_stacks.cpp: allocations on a stack the program made itself, as coroutine
// and fiber libraries do (ucontext here; boost.context, PowerDNS's MTasker alike), for
// tests/python/test_coroutine_stacks.py.
//
//   coroutine_stacks WHERE STACK N
//     WHERE  main | thread: the thread that switches to the coroutine
//     STACK  malloc: the coroutine's stack from malloc (far below the thread's stack);
//            below: mapped 64 MiB below the thread's stack
//   The coroutine runs work_in_coroutine() > level1() > level2(), which makes N typed
//   `Main` objects (each deleted), then returns to the thread. Prints "done N
//   backtraces=B": B the runtime's calls to _Unwind_Backtrace (the program exports its
//   own, which forwards to libgcc's).
#include <sys/mman.h>
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "count_backtraces.hpp"

struct Main {
  long value[3];
};


namespace {

long g_count = 0;
volatile long g_sink = 0;
ucontext_t g_thread_context, g_coroutine_context;

__attribute__((noinline)) void level2() {
  Main* m = new Main{{1, 2, 3}};
  g_sink = g_sink + m->value[1];
  delete m;
}
__attribute__((noinline)) void level1() {
  level2();
  asm volatile("");
}
__attribute__((noinline)) void work_in_coroutine() {
  for (long i = 0; i < g_count; ++i) level1();
}

int run(const char* stack_kind) {
  constexpr size_t kSize = 256 * 1024;
  char* stack;
  if (std::strcmp(stack_kind, "below") == 0) {
    int here;
    uintptr_t hint = (reinterpret_cast<uintptr_t>(&here) - (64u << 20)) & ~uintptr_t{0xfff};
    void* mapped = mmap(reinterpret_cast<void*>(hint), kSize, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (mapped == MAP_FAILED) return 3;
    stack = static_cast<char*>(mapped);
  } else {
    stack = static_cast<char*>(std::malloc(kSize));
  }
  getcontext(&g_coroutine_context);
  g_coroutine_context.uc_stack.ss_sp = stack;
  g_coroutine_context.uc_stack.ss_size = kSize;
  g_coroutine_context.uc_link = &g_thread_context;
  makecontext(&g_coroutine_context, work_in_coroutine, 0);
  swapcontext(&g_thread_context, &g_coroutine_context);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  g_count = std::atol(argv[3]);
  int status = 0;
  if (std::strcmp(argv[1], "thread") == 0)
    std::thread([&] { status = run(argv[2]); }).join();
  else
    status = run(argv[2]);
  if (status == 0) std::printf("done %ld backtraces=%lu\n", g_count, g_backtraces);
  return status;
}
