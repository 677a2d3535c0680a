// untracked_live.cpp: blocks live at exit that the profile does not count.
// Run with HEAPTYPE_START=stopped: 100 x new Early (16 B) before heaptype::start(),
// so they carry the runtime's header but are not recorded; then 3 x new Kept (24 B).
// All of them stay live: the profile counts 3 blocks live at exit, the runtime's
// registry holds 103 headers.
#include <heaptype/heaptype.hpp>

struct Early { long v[2]; };
struct Kept { long v[3]; };

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

int main() {
  for (int i = 0; i < 100; ++i) keep(new Early);
  heaptype::start();
  for (int i = 0; i < 3; ++i) keep(new Kept);
  return 0;
}
