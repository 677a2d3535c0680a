// control.cpp: heaptype::dump() in the middle of a run, and fork().
//
// Usage:
//   control dump SNAPSHOT   10 x new Before (live); dump(SNAPSHOT); then 20 x new
//                           After (live) and 5 of the Before deleted. Exit status 3
//                           if dump() reported failure.
//   control fork            3 x new ParentT (live); fork(); the child does 11 x new
//                           ChildT, deletes 7 of them and one inherited ParentT, then
//                           exit(0); the parent waits, prints "child <pid>" and does
//                           2 x new AfterFork (live). Exit status 4 if the child failed.
//   control dump_then_threads SNAPSHOT
//                           the main thread: 1,000 x new + delete Before, dump(SNAPSHOT)
//                           twice (the aggregated mode pauses the main thread's lock-free
//                           counts and hands them back), 1,000 more; then it and 3
//                           threads at once each 20,000 x new After, every second one
//                           deleted at once, the rest at the end, and 5 x new Kept (live).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Before { long v[4]; };
struct After { long v[5]; };
struct ParentT { long v[6]; };
struct ChildT { long v[7]; };
struct AfterFork { long v[8]; };

static_assert(sizeof(Before) == 32 && sizeof(After) == 40 && sizeof(ParentT) == 48 &&
              sizeof(ChildT) == 56 && sizeof(AfterFork) == 64, "");

static int run_dump(const char* snapshot) {
  Before* before[10];
  for (Before*& b : before) keep(b = new Before);
  if (!heaptype::dump(snapshot)) return 3;
  for (int i = 0; i < 20; ++i) keep(new After);
  for (int i = 0; i < 5; ++i) delete before[i];
  return 0;
}

struct Kept { long v[3]; };

static void churn_after(int rounds) {
  std::vector<After*> kept;
  kept.reserve(static_cast<size_t>(rounds));
  for (int i = 0; i < rounds; ++i) {
    After* a = new After;
    keep(a);
    if (i % 2) delete a;
    else kept.push_back(a);
  }
  for (After* a : kept) delete a;
  for (int i = 0; i < 5; ++i) keep(new Kept);
}

static int run_dump_then_threads(const char* snapshot) {
  for (int i = 0; i < 1000; ++i) {
    Before* b = new Before;
    keep(b);
    delete b;
  }
  if (!heaptype::dump(snapshot) || !heaptype::dump(snapshot)) return 3;
  for (int i = 0; i < 1000; ++i) {
    Before* b = new Before;
    keep(b);
    delete b;
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back(churn_after, 20000);
  churn_after(20000);
  for (std::thread& t : threads) t.join();
  return 0;
}

struct Singleton {
  long state[3];
};

// `*new T`, the leaky-singleton idiom, must compile under the new macro and be typed.
static int run_deref() {
  static Singleton& one = *new Singleton;
  one.state[0] = 1;
  Singleton& two = *new Singleton[2];
  delete[] &two;
  return one.state[0] == 1 ? 0 : 3;
}

static int run_fork(bool quick_exit) {
  ParentT* parent[3];
  for (ParentT*& p : parent) keep(p = new ParentT);
  std::fflush(stdout);
  pid_t child = fork();
  if (child < 0) return 5;
  if (child == 0) {
    ChildT* made[11];
    for (ChildT*& c : made) keep(c = new ChildT);
    for (int i = 0; i < 7; ++i) delete made[i];
    delete parent[0];
    if (quick_exit) _exit(0);  // no destructors: the usual end of a forked child
    std::exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("child %d\n", static_cast<int>(child));
  for (int i = 0; i < 2; ++i) keep(new AfterFork);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 4;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "dump") == 0) return run_dump(argv[2]);
  if (argc == 2 && std::strcmp(argv[1], "fork") == 0) return run_fork(false);
  if (argc == 2 && std::strcmp(argv[1], "fork_exit") == 0) return run_fork(true);
  if (argc == 2 && std::strcmp(argv[1], "deref") == 0) return run_deref();
  if (argc == 3 && std::strcmp(argv[1], "dump_then_threads") == 0) return run_dump_then_threads(argv[2]);
  return 2;
}
