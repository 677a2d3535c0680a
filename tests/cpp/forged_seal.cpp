// forged_seal.cpp: a pool whose bytes before an object pass the block header's seal
// on purpose, as they do by chance in about 1 run in 100 of a program that places a
// million objects in its own pools. The runtime must write nothing there.
//
// The program learns the process's seal secret from the runtime it is linked with
// (a test's way in: the variable has external linkage in libheaptype.a) and forges,
// 16 bytes before an object of its pool, a header that the seal accepts: the
// object's size, the seal of its address, an untyped owner of another thread of
// this process. Then it places objects there the ways a program does (placement new
// through the new macro, heaptype::tag) and prints whether its pool still holds
// exactly what it wrote. It exits 0 when nothing was written into the pool.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "heaptype/heaptype.hpp"

namespace heaptype {
namespace runtime {
extern uint64_t g_seal_secret;
extern uint32_t g_epoch;
}  // namespace runtime
}  // namespace heaptype

struct PooledNode {  // a pooled object: {uint64_t, uint64_t}, trivially destructible
  uint64_t key;
  uint64_t value;
};

namespace {

// What block_header.hpp's seal_of computes: the hash of the address with the secret.
uint32_t seal_of(uintptr_t p) {
  return static_cast<uint32_t>(((p ^ heaptype::runtime::g_seal_secret) * 0x9E3779B97F4A7C15ull) >> 32) &
         ~uint32_t{63};
}

// A header at object - 16 that the seal accepts: {size, seal | family new, owner}.
void forge_header(unsigned char* object, uint32_t size) {
  uintptr_t p = reinterpret_cast<uintptr_t>(object);
  uint32_t seal = seal_of(p) | (1u << 4);  // offset code 0, allocated by operator new
  uint64_t owner = (static_cast<uint64_t>(heaptype::runtime::g_epoch & 15) << 56) | (uint64_t{2} << 32) | 7;
  std::memcpy(object - 16, &size, 4);
  std::memcpy(object - 12, &seal, 4);
  std::memcpy(object - 8, &owner, 8);
}

alignas(64) unsigned char pool[4096];

// Forges a header before pool[offset], places an object there with `place`, and
// says whether the 16 bytes before it are still the forged ones.
template <class Place>
bool pool_untouched(const char* how, size_t offset, Place place) {
  unsigned char* object = pool + offset;
  forge_header(object, sizeof(PooledNode));
  unsigned char before[16];
  std::memcpy(before, object - 16, sizeof before);
  place(object);
  bool untouched = std::memcmp(before, object - 16, sizeof before) == 0;
  std::printf("%s: %s\n", how, untouched ? "pool untouched" : "pool overwritten");
  return untouched;
}

}  // namespace

int main() {
  PooledNode* first = new PooledNode{1, 2};  // the runtime is up, with a secret
  delete first;
  if (!heaptype::runtime::g_seal_secret) {
    std::printf("no secret: the runtime is not active\n");
    return 2;
  }
  bool ok = true;
  ok &= pool_untouched("placement new", 64, [](unsigned char* at) { new (at) PooledNode{3, 4}; });
  ok &= pool_untouched("placement new[]", 256, [](unsigned char* at) { new (at) PooledNode[1]{{5, 6}}; });
  ok &= pool_untouched("heaptype::tag", 512, [](unsigned char* at) {
    heaptype::tag(reinterpret_cast<PooledNode*>(at), 1);
  });
  return ok ? 0 : 1;
}
