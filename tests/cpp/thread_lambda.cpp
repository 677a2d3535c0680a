// thread_lambda.cpp: threads started with a lambda (which the compiler inlines into
// std::thread's _M_run) and with a function. Job blocks: 7 from the lambda's thread,
// 5 from the function's, 3 from main.
#include <thread>

struct Job {
  long values[4];
};

__attribute__((noinline)) void work(int n) {
  for (int i = 0; i < n; ++i) {
    Job* job = new Job{};
    asm volatile("" : : "r"(job) : "memory");
    delete job;
  }
}

int main() {
  std::thread with_lambda([] {
    work(7);
    asm volatile("" ::: "memory");  // not a tail call: the lambda's frame stays
  });
  with_lambda.join();
  std::thread with_function(work, 5);
  with_function.join();
  work(3);
  return 0;
}
