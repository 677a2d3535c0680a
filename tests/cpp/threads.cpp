// threads.cpp: THREADS threads (default 8) allocating and freeing PER_THREAD
// (default 5,000) objects of each kind at once; half of the frees are of blocks
// another thread allocated, handed over through a mutex-protected queue.
//
// Usage: threads [THREADS [PER_THREAD]]. Prints nothing. Each thread i (0-based):
//
//   Msg      PER_THREAD x new, pushed to the shared queue; every thread pops and
//            deletes whatever is at the front (FIFO: mostly other threads' blocks)
//            until all THREADS*PER_THREAD are freed. None live at exit.
//   Local    PER_THREAD x new + delete by the same thread. None live at exit.
//   Arr      one new Arr[i + 1] (Arr has a destructor: 8-byte cookie), delete[]'d.
//   Kept     7 x new, never freed: THREADS * 7 blocks live at exit.
//
// The queue is a fixed ring of pointers in static storage, so the program's only
// heap blocks are the ones above (plus std::thread's start-up state, untyped).
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Msg { int from; int seq; long payload[2]; };
struct Local { long a, b, c; };
struct Arr { int v = 0; ~Arr() { keep(this); } };
struct Kept { char bytes[48]; };

static_assert(sizeof(Msg) == 24 && sizeof(Local) == 24 && sizeof(Arr) == 4 && sizeof(Kept) == 48, "");

constexpr int kMaxThreads = 64;
constexpr int kKeptPerThread = 7;
constexpr size_t kRing = 1 << 20;

std::mutex g_lock;
Msg* g_ring[kRing];
size_t g_head = 0, g_tail = 0;
std::atomic<long> g_freed{0};
long g_total = 0;
Kept* g_kept[kMaxThreads][kKeptPerThread];

static bool pop_and_delete() {
  Msg* m = nullptr;
  {
    std::lock_guard<std::mutex> guard(g_lock);
    if (g_head == g_tail) return false;
    m = g_ring[g_head++ % kRing];
  }
  delete m;
  g_freed.fetch_add(1);
  return true;
}

static void work(int index, int per_thread) {
  for (int k = 0; k < kKeptPerThread; ++k) {
    g_kept[index][k] = new Kept;
    keep(g_kept[index][k]);
  }
  Arr* arr = new Arr[index + 1];
  keep(arr);
  for (int j = 0; j < per_thread; ++j) {
    Msg* m = new Msg{index, j, {0, 0}};
    {
      std::lock_guard<std::mutex> guard(g_lock);
      g_ring[g_tail++ % kRing] = m;
    }
    Local* l = new Local;
    keep(l);
    delete l;
    if (j % 2) pop_and_delete();
  }
  delete[] arr;
  while (g_freed.load() < g_total)
    if (!pop_and_delete()) std::this_thread::yield();
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 8;
  int per_thread = argc > 2 ? std::atoi(argv[2]) : 5000;
  if (threads < 1 || threads > kMaxThreads || per_thread < 1 ||
      static_cast<size_t>(threads) * per_thread > kRing)
    return 2;
  g_total = static_cast<long>(threads) * per_thread;
  std::thread* pool[kMaxThreads];
  for (int i = 0; i < threads; ++i) pool[i] = new std::thread(work, i, per_thread);
  for (int i = 0; i < threads; ++i) {
    pool[i]->join();
    delete pool[i];
  }
  return 0;
}
