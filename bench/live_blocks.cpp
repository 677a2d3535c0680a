// live_blocks.cpp: a workload that holds many large live blocks, for bench/run_bench.py.
//
// Keeps `blocks` 64 KiB buffers alive (3,000 by default: 188 MiB of heap), writes one
// byte per page of each so they are resident, then replaces `replacements` of them
// one at a time in a fixed pseudo-random order. The heap is big and its blocks few:
// a profiler whose bookkeeping grows with the heap's span (not with its blocks) shows
// here as peak RSS well above plain.
//
// Arguments: [blocks=3000] [replacements=200000]; `0 0` is the almost empty run. It
// prints its own ground truth on stderr like ../../shared/bench/alloc_bench.cpp.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace {

constexpr size_t kBlockBytes = 64 * 1024;
constexpr size_t kPage = 4096;

struct Buffer {
  unsigned char bytes[kBlockBytes];
};

uint64_t g_new_calls = 0;  // operator-new calls issued by this program's own code

Buffer* make_buffer(uint64_t stamp) {
  ++g_new_calls;
  Buffer* b = new Buffer;
  for (size_t at = 0; at < kBlockBytes; at += kPage) b->bytes[at] = static_cast<unsigned char>(stamp + at);
  return b;
}

long vm_hwm_kb() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::strtol(line + 6, nullptr, 10);
  std::fclose(f);
  return kb;
}

}  // namespace

int main(int argc, char** argv) {
  long blocks = argc > 1 ? std::atol(argv[1]) : 3000;
  long replacements = argc > 2 ? std::atol(argv[2]) : 200000;
  std::vector<Buffer*> live(static_cast<size_t>(blocks), nullptr);
  uint64_t checksum = 0, rng = 0x9E3779B97F4A7C15ull;
  for (long i = 0; i < blocks; ++i) live[static_cast<size_t>(i)] = make_buffer(static_cast<uint64_t>(i));
  for (long r = 0; r < replacements && blocks > 0; ++r) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    Buffer*& slot = live[rng % static_cast<uint64_t>(blocks)];
    checksum += slot->bytes[0];
    delete slot;
    slot = make_buffer(rng);
  }
  for (Buffer* b : live) {
    checksum += b->bytes[kPage];
    delete b;
  }
  long hwm = vm_hwm_kb();
  std::fprintf(stderr, "checksum=%llu program_new_calls=%llu [blocks=%ld replacements=%ld] VmHWM_kB=%ld\n",
               static_cast<unsigned long long>(checksum), static_cast<unsigned long long>(g_new_calls),
               blocks, replacements, hwm);
  return 0;
}
