// cut_walk.cpp: allocations whose stack passes through libstdc++'s own compiled code,
// built without frame pointers, the way std::put_time writes into an ostringstream:
// std::time_put<char>::do_put (in libstdc++.so) grows the stream's string, whose
// buffer the program's instantiation allocates. A frame-pointer walk from there may
// stop inside libstdc++.
//
// Usage: cut_walk [N] (default 200). Prints the length of the last text.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <sstream>
#include <string>

__attribute__((noinline)) std::string long_date(const std::tm& when) {
  std::ostringstream out;
  out << std::put_time(&when, "%A %d %B %Y, %H:%M:%S, week %U of the year, day %j");
  return out.str();
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 200;
  std::tm when = {};
  when.tm_year = 124;
  when.tm_mday = 1;
  size_t length = 0;
  for (int i = 0; i < n; ++i) {
    when.tm_yday = i % 365;
    length = long_date(when).size();
  }
  std::printf("%zu\n", length);
  return 0;
}
