// cow_strings.cpp: strings of libstdc++'s copy-on-write ABI (build with
// -D_GLIBCXX_USE_CXX11_ABI=0, as programs built for old distributions and many
// prebuilt tools are), whose code runs from libstdc++.so. Each string is one block: the
// _Rep (length, capacity, reference count) and the characters after it.
//
// usage: cow_strings N   makes N strings of 10..10+N-1 chars and one wstring of 100;
// prints "strings=N bytes=B chars=C wstring_bytes=W", B and W the blocks' sizes, C the
// strings' characters with their terminators.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  unsigned n = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 10;
  std::vector<std::string> strings;
  strings.reserve(n);
  unsigned long bytes = 0, chars = 0;
  constexpr unsigned long kRep = 3 * sizeof(long);  // _Rep: length, capacity, refcount
  for (unsigned i = 0; i < n; ++i) {
    strings.push_back(std::string(10 + i, 'a' + i % 26));
    bytes += kRep + 10 + i + 1;
    chars += 10 + i + 1;
  }
  std::wstring wide(100, L'w');
  std::printf("strings=%u bytes=%lu chars=%lu wstring_bytes=%lu\n", n, bytes, chars,
              kRep + (wide.size() + 1) * sizeof(wchar_t));
  return strings.back().size() == 10 + n - 1 ? 0 : 1;
}
