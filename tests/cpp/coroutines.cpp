// coroutines.cpp: C++20 coroutines, whose frames the compiler allocates with operator
// new and no new-expression names (tests/python/test_coroutines.py). Frames made:
//   net::Session::serve(int)   30  a member coroutine
//   fill<double>(double, int)  20  a function template's
//   fill<long>(long, int)      10
//   the lambda in main         40  (GCC inlines its ramp into main: not named there)
//   pooled(int)                 5  its promise type has its own operator new (malloc)
// and one `new Node`. Each frame is destroyed before the next is made.
#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

struct Task {
  struct promise_type {
    Task get_return_object() { return Task{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
  explicit Task(std::coroutine_handle<promise_type> handle) : h(handle) {}
  Task(Task&& other) noexcept : h(other.h) { other.h = nullptr; }
  ~Task() {
    if (h) h.destroy();
  }
  void run() {
    while (!h.done()) h.resume();
  }
  std::coroutine_handle<promise_type> h;
};

#ifdef new  // built with HeapType's new macro: a class's own operator new is fenced
#define FENCED_NEW 1
#include <heaptype/undef_new.h>
#endif
struct Pooled {
  struct promise_type {
    static void* operator new(std::size_t size) { return std::malloc(size); }
    static void operator delete(void* p) { std::free(p); }
    Pooled get_return_object() { return Pooled{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
  std::coroutine_handle<promise_type> h;
  ~Pooled() {
    if (h) h.destroy();
  }
};
#ifdef FENCED_NEW
#include <heaptype/define_new.h>
#endif

namespace net {
struct Session {
  long served = 0;
  Task serve(int requests) {
    for (int i = 0; i < requests; ++i) co_await std::suspend_always{};
    served += requests;
  }
};
}  // namespace net

template <typename T>
Task fill(T value, int steps) {
  std::string label(100, 'x');
  for (int i = 0; i < steps; ++i) co_await std::suspend_always{};
  (void)value;
}

Pooled pooled(int n) {
  co_await std::suspend_always{};
  (void)n;
}

struct Node {
  long value;
  Node* next;
};

int main(int argc, char**) {
  net::Session session;
  for (int k = 0; k < 30; ++k) {
    Task t = session.serve(3);
    t.run();
  }
  for (int k = 0; k < 20; ++k) {
    Task t = fill<double>(1.5, 2);
    t.run();
  }
  for (int k = 0; k < 10; ++k) {
    Task t = fill<long>(1, 2);
    t.run();
  }
  auto steps = [](int n) -> Task {
    for (int i = 0; i < n; ++i) co_await std::suspend_always{};
  };
  for (int k = 0; k < 40; ++k) {
    Task t = steps(argc);
    t.run();
  }
  for (int k = 0; k < 5; ++k) {
    Pooled p = pooled(1);
    p.h.resume();
  }
  Node* node = new Node{session.served, nullptr};
  std::printf("served %ld\n", node->value);
  delete node;
  return 0;
}
