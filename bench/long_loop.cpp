// long_loop.cpp: allocation at full speed for a given time, for the footprint of long runs
// (bench/footprint_bench.py). Three types, a rolling window of live objects, a few call
// paths: what a service's steady state looks like to a heap profiler.
//
// usage: long_loop SECONDS   prints "allocations=N live=M" at the end
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Request {
  char header[48];
  long id;
};
struct Buffer {
  char bytes[200];
};
struct Reply {
  long id;
  double value[3];
};

constexpr unsigned kWindow = 4096;

template <class T>
__attribute__((noinline)) T* make(unsigned long i) {
  T* t = new T;
  reinterpret_cast<volatile char*>(t)[0] = static_cast<char>(i);
  return t;
}

__attribute__((noinline)) void handle(unsigned long i, std::vector<Request*>& requests, std::vector<Reply*>& replies) {
  unsigned slot = static_cast<unsigned>(i % kWindow);
  delete requests[slot];
  requests[slot] = make<Request>(i);
  Buffer* scratch = make<Buffer>(i);  // freed at once: a temporary
  delete scratch;
  delete replies[slot];
  replies[slot] = make<Reply>(i);
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 60;
  std::vector<Request*> requests(kWindow, nullptr);
  std::vector<Reply*> replies(kWindow, nullptr);
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  unsigned long i = 0;
  for (;; ++i) {
    if (i % 65536 == 0 && std::chrono::steady_clock::now() >= end) break;
    handle(i, requests, replies);
  }
  unsigned long live = 0;
  for (unsigned s = 0; s < kWindow; ++s) live += (requests[s] != nullptr) + (replies[s] != nullptr);
  std::printf("allocations=%lu live=%lu\n", 3 * i, live);
  return 0;
}
