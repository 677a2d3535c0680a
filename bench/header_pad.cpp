// header_pad.cpp: what the least bookkeeping an exact heap profiler could do costs a
// program by itself. Linked into a plain workload, operator new and delete do only
// this, and nothing else (no type, no record, no table):
//
//   PAD=N    pad each block by N bytes in front (default 16: HeapType's block header)
//   WALK=1   walk the frame-pointer chain of every allocation to the top of its
//            stack, keeping each return address in a thread's buffer (the least an
//            exact call path per allocation reads; build the program with
//            -fno-omit-frame-pointer, as HeapType's default mode does)
//   THREAD=1 start a second thread that sleeps, as a profile writer's would (its
//            stack, its start-up's pages of libc: what any writer thread costs)
//   STARTS=1 mark each block's start in the runtime's table of block starts (one byte
//            per 32 bytes of address space, src/runtime/block_starts.hpp), checked
//            and cleared at its delete: HeapType's exact answer to "is this a block of
//            ours?", the least a runtime pays that never reads or frees before an
//            address on a guess (add -Isrc/runtime src/runtime/block_starts.cpp)
//   UNWIND=1 unwind the stack once with the call frame information (_Unwind_Backtrace)
//            at each allocation call site seen for the first time: the least a
//            profiler pays that checks its frame-pointer walks against the CFI, as
//            an exact one must where code without frame pointers is on the stack
//            (the unwinder's code, the .eh_frame pages of every object it passes)
//   RECORD=1 the least an exact profile of types over time records, with the header
//            (PAD=16): each allocation finds its call site's site number in a small
//            per-thread memo (keyed by return address and size, as HeapType's is),
//            keeps it in the header's owner word, and appends one record (the site's
//            distance from the last, a varint) to a 64 KiB per-thread buffer, after
//            checking a clock a second thread moves on every millisecond; each delete
//            reads the owner word and appends one record. A full buffer starts over
//            (what a writer does with it is on another core, and not counted here).
//            No type hint, probation, signal or fork safety, no flags to check.
//
//   g++ -O2 -g bench/dom_parser.cpp bench/header_pad.cpp -DPAD=16 -o dom_parser_pad16
//   g++ -O2 -g bench/dom_parser.cpp bench/header_pad.cpp -DPAD=0 -o dom_parser_pad0
//   g++ -O2 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer \
//       bench/dom_parser.cpp bench/header_pad.cpp -DPAD=0 -DWALK=1 -o dom_parser_walk
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#ifndef PAD
#define PAD 16
#endif
#ifndef WALK
#define WALK 0
#endif
#ifndef THREAD
#define THREAD 0
#endif
#ifndef UNWIND
#define UNWIND 0
#endif
#ifndef STARTS
#define STARTS 0
#endif
#ifndef RECORD
#define RECORD 0
#endif
#if RECORD && PAD < 16
#error "RECORD=1 keeps the site in the header: PAD=16"
#endif

#if STARTS
// The runtime's own table (built with -Isrc/runtime src/runtime/block_starts.cpp).
#include "block_starts.hpp"
namespace {

// True (and the mark cleared) when a block of ours starts at `block`.
inline bool take_start(void* block) {
  uint8_t* mark = heaptype::runtime::block_start_mark(block);
  if (!mark) return false;
  heaptype::runtime::clear_block_start(mark);
  return true;
}

}  // namespace
#endif

#if THREAD
#include <unistd.h>
namespace {
void* sleep_on(void*) {
  for (;;) usleep(100000);
  return nullptr;
}
__attribute__((constructor)) void start_writer_thread() {
  pthread_t thread;
  if (pthread_create(&thread, nullptr, sleep_on, nullptr) == 0) pthread_detach(thread);
}
}  // namespace
#endif

#if RECORD
#include <unistd.h>
namespace {

constexpr unsigned kMemoSlots = 256;
constexpr size_t kBufferSize = 64 * 1024;

struct SiteMemo {
  uintptr_t call_site;
  size_t size;
  uint32_t site;
};

struct Recorder {
  SiteMemo memo[kMemoSlots];
  uint8_t buffer[kBufferSize];
  size_t used;
  uint32_t last_site;
  uint32_t next_site;
  uint64_t last_time;
};

thread_local Recorder t_recorder;
std::atomic<uint64_t> g_clock{1};

void* tick(void*) {
  for (;;) {
    usleep(1000);
    g_clock.fetch_add(1, std::memory_order_relaxed);
  }
  return nullptr;
}
__attribute__((constructor)) void start_clock() {
  pthread_t thread;
  if (pthread_create(&thread, nullptr, tick, nullptr) == 0) pthread_detach(thread);
}

// One record: a time record first when the clock moved on, then the site's distance
// from the last one recorded, zigzag and varint encoded, with the event's kind in its
// lowest bit.
inline void record(Recorder& r, uint32_t site, unsigned kind) {
  if (__builtin_expect(r.used + 32 > kBufferSize, 0)) r.used = 0;
  uint64_t now = g_clock.load(std::memory_order_relaxed);
  if (__builtin_expect(now != r.last_time, 0)) {
    r.buffer[r.used++] = 0;
    r.last_time = now;
  }
  int64_t distance = static_cast<int64_t>(site) - static_cast<int64_t>(r.last_site);
  uint64_t v = ((static_cast<uint64_t>(distance) << 1) ^ static_cast<uint64_t>(distance >> 63)) << 1 | kind;
  while (v >= 0x80) {
    r.buffer[r.used++] = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  r.buffer[r.used++] = static_cast<uint8_t>(v);
  r.last_site = site;
}

__attribute__((noinline)) uint32_t new_site(SiteMemo& slot, uintptr_t call_site, size_t size) {
  Recorder& r = t_recorder;
  slot = {call_site, size, ++r.next_site};
  return slot.site;
}

inline uint32_t site_of(uintptr_t call_site, size_t size) {
  Recorder& r = t_recorder;
  SiteMemo& slot = r.memo[((call_site ^ size) * 0x9E3779B97F4A7C15ull) >> 56];
  if (__builtin_expect(slot.call_site == call_site && slot.size == size, 1)) return slot.site;
  return new_site(slot, call_site, size);
}

}  // namespace
#endif

#if WALK
namespace {

constexpr int kMaxFrames = 128;
thread_local uintptr_t t_stack_top;  // the end of this thread's stack, found once
thread_local uintptr_t t_frames[kMaxFrames];
thread_local volatile uintptr_t t_sum;  // keeps the walk's loads from being dropped

uintptr_t stack_top() {
  pthread_attr_t attr;
  void* base = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &base, &size);
    pthread_attr_destroy(&attr);
  }
  return reinterpret_cast<uintptr_t>(base) + size;
}

// Each frame's record is [saved frame pointer][return address]: a chain of dependent
// loads from the innermost frame up, stopped where the chain leaves the stack or
// stops climbing (the start-up code, built without frame pointers).
__attribute__((noinline)) void walk_frames() {
  if (!t_stack_top) t_stack_top = stack_top();
  uintptr_t top = t_stack_top;
  auto* fp = static_cast<uintptr_t*>(__builtin_frame_address(0));
  uintptr_t sum = 0;
  int n = 0;
  while (n < kMaxFrames) {
    uintptr_t next = fp[0], ra = fp[1];
    if (!ra) break;
    t_frames[n++] = ra;
    sum += ra;
    if (next <= reinterpret_cast<uintptr_t>(fp) || next + 16 > top) break;
    fp = reinterpret_cast<uintptr_t*>(next);
  }
  t_sum = sum + n;
}

}  // namespace
#endif

#if UNWIND
#include <unwind.h>
namespace {

constexpr unsigned kSiteSlots = 4096;
uintptr_t g_known_sites[kSiteSlots];  // open addressing; a full table unwinds every time
thread_local uintptr_t t_unwound[128];

_Unwind_Reason_Code keep_frame(_Unwind_Context* context, void* arg) {
  int& n = *static_cast<int*>(arg);
  if (n == 128) return _URC_END_OF_STACK;
  t_unwound[n++] = _Unwind_GetIP(context);
  return _URC_NO_REASON;
}

// Single-threaded workloads: no lock (a lost insert only unwinds once more).
__attribute__((noinline)) void unwind_if_new(uintptr_t site) {
  for (unsigned i = (site >> 4) % kSiteSlots, probes = 0; probes < kSiteSlots; i = (i + 1) % kSiteSlots, ++probes) {
    if (g_known_sites[i] == site) return;
    if (g_known_sites[i] == 0) {
      g_known_sites[i] = site;
      break;
    }
  }
  int n = 0;
  _Unwind_Backtrace(keep_frame, &n);
}

}  // namespace
#endif

void* operator new(std::size_t n) {
#if WALK
  walk_frames();
#endif
#if UNWIND
  unwind_if_new(reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
#endif
  char* p = static_cast<char*>(std::malloc(n + PAD));
  if (!p) throw std::bad_alloc();
#if STARTS
  if (!heaptype::runtime::mark_block_start(p + PAD)) std::abort();
#endif
#if RECORD
  uint32_t site = site_of(reinterpret_cast<uintptr_t>(__builtin_return_address(0)), n);
  reinterpret_cast<uint64_t*>(p)[1] = site;  // the header's owner word
  record(t_recorder, site, 0);
#endif
  return p + PAD;
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept {
#if STARTS
  if (p && !take_start(p)) {  // not one of ours: as it came
    std::free(p);
    return;
  }
#endif
  if (!p) return;
#if RECORD
  record(t_recorder, static_cast<uint32_t>(reinterpret_cast<uint64_t*>(p)[-1]), 1);
#endif
  std::free(static_cast<char*>(p) - PAD);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { operator delete(p); }
