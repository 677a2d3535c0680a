// thrown_types.cpp: thrown objects of three types, each typed by the type it is
// thrown as (the runtime interposes __cxa_throw and __cxa_init_primary_exception).
//
// argv[1] = N: throws a class of the program N times, std::runtime_error N + 1
// times, an int N + 2 times; then one Thrown through std::make_exception_ptr,
// rethrown twice with std::rethrow_exception (each rethrow allocates a dependent
// exception, a block of its own that refers to the Thrown), and one
// std::out_of_range thrown by vector::at (inside libstdc++.so with libstdc++).
// Prints the counts it caught and the sizes of the thrown types.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <vector>

struct Thrown {
  long code[6];
};

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 3;
  int thrown = 0, errors = 0, ints = 0, rethrown = 0, out_of_range = 0;
  for (int i = 0; i < n; ++i) {
    try {
      throw Thrown{{i, 1, 2, 3, 4, 5}};
    } catch (const Thrown& e) {
      thrown += static_cast<int>(e.code[1]);
    }
  }
  for (int i = 0; i < n + 1; ++i) {
    try {
      throw std::runtime_error("e");
    } catch (const std::runtime_error&) {
      ++errors;
    }
  }
  for (int i = 0; i < n + 2; ++i) {
    try {
      throw i;
    } catch (int) {
      ++ints;
    }
  }
  std::exception_ptr stored = std::make_exception_ptr(Thrown{{7, 1, 2, 3, 4, 5}});
  for (int i = 0; i < 2; ++i) {
    try {
      std::rethrow_exception(stored);
    } catch (const Thrown& e) {
      rethrown += static_cast<int>(e.code[1]);
    }
  }
  stored = nullptr;
  std::vector<int> empty;
  try {
    std::printf("%d", empty.at(static_cast<size_t>(n)));
  } catch (const std::out_of_range&) {
    ++out_of_range;
  }
  std::printf("thrown=%d errors=%d ints=%d rethrown=%d out_of_range=%d sizeof_thrown=%zu sizeof_error=%zu "
              "sizeof_int=%zu sizeof_out_of_range=%zu\n",
              thrown, errors, ints, rethrown, out_of_range, sizeof(Thrown), sizeof(std::runtime_error), sizeof(int),
              sizeof(std::out_of_range));
  return 0;
}
