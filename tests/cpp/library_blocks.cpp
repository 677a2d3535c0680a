// library_blocks.cpp: what the standard library allocates on the program's behalf,
// beyond containers and strings: a std::function holding a large lambda, a std::any
// holding a value too large for its own buffer, a valarray, a regex
// search, a locale with a facet of the program's, thrown and caught exceptions, a
// std::thread, file streams, and stdout through stdio (its buffer).
//
// argv[1]: how many exceptions to throw (default 3). Prints one line.
#include <any>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <locale>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <valarray>

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Thrown {
  long code[6];
};

struct Grouping : std::numpunct<char> {
  std::string do_grouping() const override { return "\3"; }
};

int main(int argc, char** argv) {
  int throws = argc > 1 ? std::atoi(argv[1]) : 3;
  long big[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::function<long()> f = [big] { return big[0] + big[7]; };
  long sum = f();
  std::any held = Thrown{{1, 2, 3, 4, 5, 6}};  // 48 bytes: on the heap
  sum += std::any_cast<Thrown&>(held).code[5];
  std::valarray<double> values(2.0, 100);
  sum += static_cast<long>(values.sum());

  std::regex pattern("([a-z]+)_([0-9]+)");
  std::smatch match;
  std::string text = "the key_1234 and value_99 of the configuration file";
  if (std::regex_search(text, match, pattern)) sum += static_cast<long>(match.length(0));

  std::locale grouped(std::locale::classic(), new Grouping);
  std::ostringstream out;
  out.imbue(grouped);
  out << 1234567;
  sum += static_cast<long>(out.str().size());

  int caught = 0;
  for (int i = 0; i < throws; ++i) {
    try {
      throw Thrown{{i, 1, 2, 3, 4, 5}};
    } catch (const Thrown& e) {
      caught += e.code[1];
    }
  }

  std::thread worker([&sum] { sum += 1; });
  worker.join();

  const char* path = std::getenv("LIBRARY_BLOCKS_FILE");
  if (path) {
    std::ofstream file(path);
    file << "line of the file\n";
    file.close();
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    sum += static_cast<long>(line.size());
  }
  keep(&sum);
  std::printf("caught=%d sum=%ld\n", caught, sum);
  return 0;
}
