// strings.cpp: string-heavy code, as a small config-file parser writes it. Every
// string is longer than any small-string buffer (libstdc++ 15 chars, libc++ 22), so
// each one owns a heap buffer.
//
//   write:  an ostringstream receives `rounds` lines "key_<i>_... = value_<to_string(i)>_..."
//   read:   istringstream over ostringstream::str(); std::getline line by line;
//           substr() for key and value; the pairs go into a std::map<string, string>
//   build:  a string appended to, piece by piece, then copied
//   keep:   the map is leaked (live at exit), and so are `rounds` strings of exactly
//           100 chars, each reserved once: `rounds` buffers of capacity()+1 bytes
//   chars:  a std::vector<char> of 300 and a new char[500], leaked: the `char` row,
//           2 blocks, 800 bytes, apart from the strings' characters
//
// It prints (with write(2), not stdio) what it knows of the live string buffers at exit, the code's truth the
// tests compare with the profile's row for std::string's buffers:
//   live_blocks=<buffers of the leaked map and strings> live_bytes=<sum of capacity()+1>
//   kept_blocks=<rounds> kept_bytes=<rounds * (capacity()+1) of the 100-char strings>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <unistd.h>

// HeapType's headers type strings without changing them: a string's allocator_type is
// still std::allocator<char> (a stream of it takes the string: jsoncpp's pattern).
static_assert(std::is_same<std::string::allocator_type, std::allocator<char> >::value, "std::string's allocator");

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

// A heap buffer's size: what basic_string allocates, with the terminating NUL.
static std::size_t buffer_bytes(const std::string& s) { return s.capacity() + 1; }

static std::string config_text(int rounds) {
  std::ostringstream out;
  for (int i = 0; i < rounds; ++i)
    out << "key_" << i << "_of_the_configuration_file = value_" + std::to_string(i * 7919) + "_long_enough_to_be_on_the_heap\n";
  return out.str();
}

static std::map<std::string, std::string>* parse(const std::string& text) {
  auto* entries = new std::map<std::string, std::string>;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string::size_type eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq);
    std::string value = line.substr(eq + 3);
    (*entries)[key] = value;
  }
  return entries;
}

static std::string built(int rounds) {
  std::string s;
  for (int i = 0; i < rounds; ++i) {
    s += "piece ";
    s.append(std::to_string(i));
    s.push_back(';');
  }
  std::string copy = s;
  keep(copy.data());
  return s;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  std::string text = config_text(rounds);
  std::map<std::string, std::string>* entries = parse(text);
  keep(entries);
  std::string long_one = built(rounds);
  keep(long_one.data());

  auto* kept = new std::vector<std::string>;
  kept->reserve(rounds);
  std::size_t kept_bytes = 0;
  for (int i = 0; i < rounds; ++i) {
    std::string s;
    s.reserve(100);
    s.assign(100, static_cast<char>('a' + i % 26));
    kept_bytes += buffer_bytes(s);
    kept->push_back(std::move(s));
  }
  keep(kept);
  std::vector<char>* bytes = new std::vector<char>(300);
  char* raw = new char[500];
  keep(bytes), keep(raw);

  std::size_t live_blocks = static_cast<std::size_t>(rounds), live_bytes = kept_bytes;
  for (const auto& entry : *entries) {
    live_blocks += 2;
    live_bytes += buffer_bytes(entry.first) + buffer_bytes(entry.second);
  }
  // Not through stdio, whose buffer would be one more block of the C library's.
  char line[160];
  int n = std::snprintf(line, sizeof line, "live_blocks=%zu live_bytes=%zu kept_blocks=%d kept_bytes=%zu\n",
                        live_blocks, live_bytes, rounds, kept_bytes);
  return write(STDOUT_FILENO, line, static_cast<std::size_t>(n)) == n ? 0 : 1;
}
