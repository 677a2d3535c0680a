// pool_churn.cpp: threads that come and go, each meeting many sites.
//
// A server's pool replaces its threads; each thread numbers its own sites. Here each of
// `rounds` rounds starts two threads, each allocating and freeing a block of each of
// `sizes` sizes (default 20,000: more sites than a generation holds) and keeping one
// Kept, which the main thread deletes after joining it (a free of an ended thread's
// block). Prints "rounds=N".
//
// usage: pool_churn [rounds] [sizes]
#include <pthread.h>

#include <cstdio>
#include <cstdlib>

struct Kept {
  long values[3];
};

struct Work {
  unsigned sizes;
  Kept* kept;
};

char* volatile g_escape = nullptr;

static void* work(void* argument) {
  Work* w = static_cast<Work*>(argument);
  for (unsigned i = 0; i < w->sizes; ++i) {
    char* block = static_cast<char*>(std::malloc(16 + i));
    g_escape = block;  // seen by no one, but kept: the compiler may not drop the pair
    std::free(block);
  }
  w->kept = new Kept();
  return nullptr;
}

int main(int argc, char** argv) {
  unsigned rounds = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 4;
  unsigned sizes = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 20000;
  for (unsigned round = 0; round < rounds; ++round) {
    pthread_t threads[2];
    Work work_of[2] = {{sizes, nullptr}, {sizes, nullptr}};
    for (int i = 0; i < 2; ++i) pthread_create(&threads[i], nullptr, work, &work_of[i]);
    for (pthread_t& t : threads) pthread_join(t, nullptr);
    for (Work& w : work_of) delete w.kept;
  }
  std::printf("rounds=%u\n", rounds);
  return 0;
}
