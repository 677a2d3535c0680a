// cow_strings.cpp: strings of libstdc++'s copy-on-write ABI (build with
// -D_GLIBCXX_USE_CXX11_ABI=0, as programs built for old distributions and many
// prebuilt tools are), whose code runs from libstdc++.so. Each string is one block: the
// _Rep (length, capacity, reference count) and the characters after it.
//
// usage: cow_strings N   makes N strings of 10..10+N-1 chars, one wstring of 100, and 5
// strings of an allocator of its own (which must see their 5 blocks);
// prints "strings=N bytes=B chars=C wstring_bytes=W", B and W the blocks' sizes, C the
// strings' characters with their terminators.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

// HeapType's headers type strings without changing them: a string's allocator_type is
// still std::allocator<char> (a stream of it takes the string: jsoncpp's pattern).
static_assert(std::is_same<std::string::allocator_type, std::allocator<char> >::value, "std::string's allocator");

// A string of another allocator must keep allocating through it.
static unsigned g_counted;
template <class T>
struct Counting : std::allocator<T> {
  template <class U>
  struct rebind {
    typedef Counting<U> other;
  };
  Counting() {}
  template <class U>
  Counting(const Counting<U>&) {}
  T* allocate(std::size_t n, const void* = 0) {
    ++g_counted;
    return std::allocator<T>::allocate(n);
  }
};
typedef std::basic_string<char, std::char_traits<char>, Counting<char> > CountedString;

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
  std::vector<CountedString> counted;
  for (unsigned i = 0; i < 5; ++i) counted.push_back(CountedString(20 + i, 'c'));
  if (g_counted != 5) {
    std::printf("the strings of Counting allocated %u blocks through it, not 5\n", g_counted);
    return 2;
  }
  std::printf("strings=%u bytes=%lu chars=%lu wstring_bytes=%lu\n", n, bytes, chars,
              kRep + (wide.size() + 1) * sizeof(wchar_t));
  return strings.back().size() == 10 + n - 1 ? 0 : 1;
}
