// Compiled with -Wall -Wextra -Weffc++ -Werror -pedantic and the force-included
// heaptype/new.hpp (tests/integration/test_strict_header.py): every form of
// new-expression the header rewrites, and standard containers through the typed
// allocator shim, must compile without a warning from HeapType's headers; in C++20
// also new-expressions evaluated at compile time.
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace shapes {
struct Point {
  int x;
  int y;
};
}  // namespace shapes

#if defined(__cpp_constexpr_dynamic_alloc)
// C++20: new-expressions in a constant expression (the operators the macro calls are
// constexpr and report nothing there).
constexpr int constant_sum() {
  shapes::Point* p = new shapes::Point{20, 22};
  shapes::Point& r = *new shapes::Point{1, 1};
  int sum = p->x + p->y + r.x;
  delete p;
  delete &r;
  return sum;
}
static_assert(constant_sum() == 43, "new in a constant expression");
#endif

// A placement new into an object not constructed yet (kj::Maybe's NullableValue): at -O2
// GCC 12 took the header's report of the address for a read of uninitialized memory.
namespace maybe {
struct Empty {};
template <typename T>
struct Optional {
  explicit Optional(T&& t) : set(true) { new (&value) T(static_cast<T&&>(t)); }
  ~Optional() {}
  bool set;
  union {
    T value;
  };
};
struct Source {
  virtual ~Source() = default;
  virtual void get(Optional<Empty>& o);
};
void Source::get(Optional<Empty>& o) {
  o.~Optional();
  new (&o) Optional<Empty>(Empty());
}
}  // namespace maybe

int main() {
  maybe::Optional<maybe::Empty> optional{maybe::Empty()};
  maybe::Source().get(optional);
  shapes::Point* one = new shapes::Point{1, 2};
  shapes::Point* many = new shapes::Point[3];
  shapes::Point& ref = *new shapes::Point{3, 4};
  alignas(shapes::Point) unsigned char storage[sizeof(shapes::Point)];
  shapes::Point* placed = ::new (static_cast<void*>(storage)) shapes::Point{5, 6};
  std::vector<std::string> words{"typed", "allocator"};
  std::map<int, shapes::Point> points{{1, *one}};
  std::unique_ptr<shapes::Point> owned(new shapes::Point{7, 8});
  auto shared = std::make_shared<shapes::Point>();
  int sum = one->x + many[0].x + ref.y + placed->y + owned->x + shared->x;
  sum += static_cast<int>(words.size() + points.size()) + (optional.set ? 1 : 0);
  delete one;
  delete[] many;
  delete &ref;
  return sum == 0 ? 1 : 0;
}
