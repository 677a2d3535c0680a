// steady_loop.cpp: a service's steady state for a given number of rounds, the same work
// every run (tests/python/test_aggregate.py compares the full and the aggregated profile
// of it). Each round replaces one Request and one Reply of a rolling window, makes a
// scratch Buffer freed at once (a temporary), and every 64th round a std::string and an
// untyped malloc'd block that live until the next such round. The window grows for the
// first half of the run (the peak is reached in the middle) and shrinks after; one Reply
// per 1,000 rounds is leaked.
//
// usage: steady_loop ROUNDS [TIMES]   (TIMES: the whole run again and again, default once)
#include <cstdio>
#include <cstdlib>
#include <string>
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

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

template <class T>
__attribute__((noinline)) T* make(unsigned long i) {
  T* t = new T;
  reinterpret_cast<volatile char*>(t)[0] = static_cast<char>(i);
  return t;
}

__attribute__((noinline)) void* scratch_bytes(size_t n) { return std::malloc(n); }

void run(unsigned long rounds);

int main(int argc, char** argv) {
  unsigned long rounds = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 100000;
  unsigned long times = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 1;
  for (unsigned long t = 0; t < times; ++t) run(rounds);
  std::printf("rounds=%lu\n", rounds * times);
  return 0;
}

void run(unsigned long rounds) {
  std::vector<Request*> requests;
  std::vector<Reply*> replies;
  requests.reserve(rounds / 2 + 1);
  replies.reserve(rounds / 2 + 1);
  std::string* text = nullptr;
  void* raw = nullptr;
  for (unsigned long i = 0; i < rounds; ++i) {
    bool growing = i < rounds / 2;
    if (growing || requests.empty()) {
      requests.push_back(make<Request>(i));
      replies.push_back(make<Reply>(i));
    } else {
      delete requests.back();
      requests.pop_back();
      if (i % 1000 != 0) delete replies.back();  // else leaked
      replies.pop_back();
    }
    Buffer* scratch = make<Buffer>(i);
    delete scratch;
    if (i % 64 == 0) {
      delete text;
      text = new std::string(40 + i % 7, 'x');
      std::free(raw);
      raw = scratch_bytes(100 + i % 3);
      keep(raw);
    }
  }
  for (Request* r : requests) delete r;
  for (Reply* r : replies) delete r;
  delete text;
  std::free(raw);
}
