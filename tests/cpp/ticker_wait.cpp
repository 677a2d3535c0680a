// ticker_wait.cpp: allocations on either side of a pause, then the process's own
// count of threads (/proc/self/status), printed as "threads N".
//
//   ticker_wait PAUSE_MS   100 Early (32 B) made and held, a pause of PAUSE_MS,
//                          50 Late (64 B) made and held, all freed
//
// The aggregated mode starts its ticker thread with the first count after 50 ms of
// the run (src/runtime/clock.hpp): a pause of 0 ends with one thread, a pause of 80 ms
// with two, and starting the thread must add nothing to the program's counts.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

struct Early { char bytes[32]; };
struct Late { char bytes[64]; };

static int threads_now() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (!status) return -1;
  char line[256];
  int threads = -1;
  while (std::fgets(line, sizeof line, status))
    if (std::strncmp(line, "Threads:", 8) == 0) threads = std::atoi(line + 8);
  std::fclose(status);
  return threads;
}

int main(int argc, char** argv) {
  int pause_ms = argc > 1 ? std::atoi(argv[1]) : 0;
  Early* early[100];
  for (Early*& p : early) p = new Early;
  std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  Late* late[50];
  for (Late*& p : late) p = new Late;
  for (Early* p : early) delete p;
  for (Late* p : late) delete p;
  int threads = threads_now();
  std::printf("threads %d\n", threads);
  return 0;
}
