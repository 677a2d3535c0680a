// handoff.cpp: threads hand blocks to each other while a semaphore bounds how many
// are live, so the true peak of Parcel is known: at most kBound blocks.
//
// Usage: handoff [PRODUCERS [CONSUMERS [PER_PRODUCER]]] (defaults 8, 8, 20,000).
// Each producer waits for a free slot (sem `space`, kBound slots), allocates a
// Parcel and queues it; each consumer takes one, deletes it and gives the slot
// back. A block is allocated only after another is freed once kBound are live, so
// at no moment are more than kBound Parcels live. Every Parcel is freed by a thread
// other than the one that allocated it. Prints nothing.
#include <semaphore.h>

#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Parcel {
  char bytes[1000];
};
static_assert(sizeof(Parcel) == 1000, "");

constexpr int kBound = 48;
constexpr int kRing = 64;  // > kBound: the queue never holds more than kBound

sem_t g_space, g_items;
std::mutex g_lock;
Parcel* g_ring[kRing];
long g_head = 0, g_tail = 0;

void produce(long count) {
  for (long i = 0; i < count; ++i) {
    while (sem_wait(&g_space) != 0) {
    }
    Parcel* p = new Parcel;
    keep(p);
    {
      std::lock_guard<std::mutex> guard(g_lock);
      g_ring[g_tail++ % kRing] = p;
    }
    sem_post(&g_items);
  }
}

void consume(long count) {
  for (long i = 0; i < count; ++i) {
    while (sem_wait(&g_items) != 0) {
    }
    Parcel* p;
    {
      std::lock_guard<std::mutex> guard(g_lock);
      p = g_ring[g_head++ % kRing];
    }
    delete p;
    sem_post(&g_space);
  }
}

int main(int argc, char** argv) {
  int producers = argc > 1 ? std::atoi(argv[1]) : 8;
  int consumers = argc > 2 ? std::atoi(argv[2]) : 8;
  long per_producer = argc > 3 ? std::atol(argv[3]) : 20000;
  long total = producers * per_producer;
  if (producers < 1 || consumers < 1 || total % consumers) return 2;
  sem_init(&g_space, 0, kBound);
  sem_init(&g_items, 0, 0);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(producers + consumers));
  for (int i = 0; i < consumers; ++i) threads.emplace_back(consume, total / consumers);
  for (int i = 0; i < producers; ++i) threads.emplace_back(produce, per_producer);
  for (std::thread& t : threads) t.join();
  return 0;
}
