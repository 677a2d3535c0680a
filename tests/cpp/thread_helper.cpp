// thread_helper.cpp: a thread's first function that the main thread also calls, deeper.
// Built without frame pointers and run under `heaptype run`: the walk steps over every
// frame by its rule, and only the frames of the libraries threads start in (libc's
// start_thread, clone3) may end it.
//
// Usage: thread_helper. Prints "done". A thread started on worker() makes 3 Block
// through worker > helper; then main > relay > worker > helper makes 3 more.
#include <pthread.h>

#include <cstdio>

struct Block { long v[3]; };

static Block* kept[6];
static int count = 0;

__attribute__((noinline)) void helper() {
  kept[count++] = new Block;
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void* worker(void*) {
  for (int i = 0; i < 3; ++i) helper();
  asm volatile("" ::: "memory");
  return nullptr;
}

__attribute__((noinline)) void relay() {
  worker(nullptr);
  asm volatile("" ::: "memory");
}

int main() {
  pthread_t thread;
  if (pthread_create(&thread, nullptr, worker, nullptr) != 0) return 1;
  pthread_join(thread, nullptr);
  relay();
  std::printf("done\n");
  return 0;
}
