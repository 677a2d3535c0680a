// callpaths_known.cpp: allocations whose call paths are known exactly.
//
// Built with -finstrument-functions (and frame pointers), so that the runtime's
// calling-context tree and its walked stacks can both be checked. Each scenario
// allocates types of its own, through make_and_free<T>, a template inlined into
// each caller (its hooks still run, so it is a frame of the path too: M below).
// test_callpaths.py expects, per type, exactly:
//
//   type            count  call path (root first; every other function noinline)
//   Direct              5  main > direct_outer() > direct_inner() > M
//   Direct              3  main > direct_inner() > M
//   Recursed            2  main > recurse(int) x k > M, for each k = 1..5 (recurse(4), twice)
//   BeforeThrow         2  main > catcher() > thrower1() > thrower2() > thrower3() > M
//   Oops                2  main > catcher() > ... > thrower3() > __cxa_allocate_exception (thrown)
//   AfterCatch          2  main > catcher() > M             (after the exception was caught)
//   AfterCatchCall      2  main > catcher() > after_catch_call() > M
//   BeforeJump          2  main > jumper() > jump1() > jump2() > jump3() > M
//   AfterJump           2  main > jumper() > M              (after longjmp skipped 3 exits)
//   AfterJumpCall       2  main > jumper() > after_jump_call() > M
//   Inlined             4  main > inline_caller() > inline_helper() > M  (always_inline)
//   ThreadA            10  worker_a() > a_leaf() > M                    (thread 1 of 4)
//   ThreadB            20  worker_b() > b_mid() > b_leaf() > M          (thread 2)
//   ThreadC            30  worker_c() > c_rec(int) x 3 > M              (thread 3)
//   ThreadD            40  worker_d() > M                               (thread 4)
//
// Every block is freed right away: live figures stay 0.
#include <csetjmp>
#include <thread>

#define NOINLINE __attribute__((noinline))

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Direct { long v[2]; };
struct Recursed { long v[3]; };
struct BeforeThrow { long v[5]; };
struct AfterCatch { long v[6]; };
struct AfterCatchCall { long v[7]; };
struct BeforeJump { long v[8]; };
struct AfterJump { long v[9]; };
struct AfterJumpCall { long v[10]; };
struct Inlined { long v[11]; };
struct ThreadA { long v[12]; };
struct ThreadB { long v[13]; };
struct ThreadC { long v[14]; };
struct ThreadD { long v[15]; };
struct Oops { int code; };

template <class T> static inline void make_and_free() {
  T* p = new T();
  keep(p);
  delete p;
}

// --- direct calls ------------------------------------------------------------------------
NOINLINE void direct_inner() { make_and_free<Direct>(); }
NOINLINE void direct_outer() {
  direct_inner();
  asm volatile("");  // no tail call: direct_outer stays on the stack
}

// --- recursion ---------------------------------------------------------------------------
NOINLINE void recurse(int n) {
  make_and_free<Recursed>();
  if (n > 0) recurse(n - 1);
  asm volatile("");
}

// --- an exception thrown through three instrumented frames --------------------------------
NOINLINE void thrower3() {
  make_and_free<BeforeThrow>();
  throw Oops{3};
}
NOINLINE void thrower2() {
  thrower3();
  asm volatile("");
}
NOINLINE void thrower1() {
  thrower2();
  asm volatile("");
}
NOINLINE void after_catch_call() { make_and_free<AfterCatchCall>(); }
NOINLINE void catcher() {
  try {
    thrower1();
  } catch (const Oops& e) {
    keep(&e);
  }
  make_and_free<AfterCatch>();
  after_catch_call();
  asm volatile("");
}

// --- longjmp over three instrumented frames -----------------------------------------------
static std::jmp_buf g_env;
NOINLINE void jump3() {
  make_and_free<BeforeJump>();
  std::longjmp(g_env, 1);
}
NOINLINE void jump2() {
  jump3();
  asm volatile("");
}
NOINLINE void jump1() {
  jump2();
  asm volatile("");
}
NOINLINE void after_jump_call() { make_and_free<AfterJumpCall>(); }
NOINLINE void jumper() {
  if (setjmp(g_env) == 0) jump1();
  make_and_free<AfterJump>();
  after_jump_call();
  asm volatile("");
}

// --- a function inlined into its caller (its hooks still run) ----------------------------
static inline __attribute__((always_inline)) void inline_helper() { make_and_free<Inlined>(); }
NOINLINE void inline_caller() {
  inline_helper();
  asm volatile("");
}

// --- four threads, four paths -------------------------------------------------------------
NOINLINE void a_leaf() { make_and_free<ThreadA>(); }
NOINLINE void worker_a() {
  for (int i = 0; i < 10; ++i) a_leaf();
  asm volatile("");
}
NOINLINE void b_leaf() { make_and_free<ThreadB>(); }
NOINLINE void b_mid() {
  b_leaf();
  asm volatile("");
}
NOINLINE void worker_b() {
  for (int i = 0; i < 20; ++i) b_mid();
  asm volatile("");
}
NOINLINE void c_rec(int n) {
  if (n > 0)
    c_rec(n - 1);
  else
    make_and_free<ThreadC>();
  asm volatile("");
}
NOINLINE void worker_c() {
  for (int i = 0; i < 30; ++i) c_rec(2);
  asm volatile("");
}
NOINLINE void worker_d() {
  for (int i = 0; i < 40; ++i) make_and_free<ThreadD>();
  asm volatile("");
}

int main() {
  for (int i = 0; i < 5; ++i) direct_outer();
  for (int i = 0; i < 3; ++i) direct_inner();
  for (int i = 0; i < 2; ++i) recurse(4);
  for (int i = 0; i < 2; ++i) catcher();
  for (int i = 0; i < 2; ++i) jumper();
  for (int i = 0; i < 4; ++i) inline_caller();
  std::thread a(worker_a), b(worker_b), c(worker_c), d(worker_d);
  a.join();
  b.join();
  c.join();
  d.join();
  return 0;
}
