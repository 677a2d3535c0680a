// header_pad.cpp: what a header in front of every block costs a program by itself.
// Linked into a plain workload, operator new and delete pad each block by PAD bytes
// (default 16, HeapType's block header) and do nothing else: no type, no record.
//
//   g++ -O2 -g bench/dom_parser.cpp bench/header_pad.cpp -DPAD=16 -o dom_parser_pad16
//   g++ -O2 -g bench/dom_parser.cpp bench/header_pad.cpp -DPAD=0 -o dom_parser_pad0
#include <cstdlib>
#include <new>

#ifndef PAD
#define PAD 16
#endif

void* operator new(std::size_t n) {
  char* p = static_cast<char*>(std::malloc(n + PAD));
  if (!p) throw std::bad_alloc();
  return p + PAD;
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept {
  if (p) std::free(static_cast<char*>(p) - PAD);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { operator delete(p); }
