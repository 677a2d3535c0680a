// thread_churn.cpp: threads joined once the run is past its first 50 ms, more of them
// than glibc's cache of thread stacks keeps (40 MiB; 8 MiB stacks), with nothing
// allocated or freed in between: joining them frees stacks, and their TLS with free(),
// while glibc holds the stack cache's lock. A runtime that started its ticker thread
// from that free (pthread_create takes the same lock) would wait forever
// (src/runtime/thread_state.hpp, start_ticker_if_due).
//
//   thread_churn   8 threads, each making one Item and then waiting on a pipe; after
//                  80 ms the pipe wakes them, they end and are joined, then the Items
//                  are deleted; prints "items 8"
#include <pthread.h>
#include <unistd.h>

#include <cstdio>

struct Item { long values[4]; };

static int g_pipe[2];

static void* work(void* slot) {
  *static_cast<Item**>(slot) = new Item();
  char wake;
  if (read(g_pipe[0], &wake, 1) != 1) return nullptr;
  return nullptr;  // nothing allocated or freed after the wait
}

int main() {
  if (pipe(g_pipe) != 0) return 1;
  pthread_t threads[8];
  Item* items[8] = {};
  for (int i = 0; i < 8; ++i) pthread_create(&threads[i], nullptr, work, &items[i]);
  usleep(80000);
  if (write(g_pipe[1], "xxxxxxxx", 8) != 8) return 1;
  for (pthread_t& t : threads) pthread_join(t, nullptr);
  int made = 0;
  for (Item* item : items) made += item != nullptr;
  for (Item* item : items) delete item;
  std::printf("items %d\n", made);
  return 0;
}
