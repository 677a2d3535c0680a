// callpaths_infer.cpp: untyped allocations whose type the report infers.
//
// Built with `compile_flags(stl_types=False)`: no typed allocator shim, so every
// allocation the standard library makes is untyped; the new-expressions of this
// file stay typed (new.hpp is force-included). test_callpaths.py expects the
// report to infer, from the allocator frames DWARF names at each call site:
//
//   inferred type                            allocs  objects  bytes        from
//   Foo                                          4      15    15*20        std::vector<Foo>::push_back x5
//   Bar                                          4       7    3*24 + 4*24  std::make_unique<Bar> x3, make_unique<Bar[]>(4)
//   std::_Sp_counted_ptr_inplace<Bar, ...>       1       1    40           std::make_shared<Bar>
//   std::_Rb_tree_node<std::pair<int const, Bar>> 3      3    3*64         std::map<int, Bar>::operator[] x3
//   char                                         1      41    41           std::string(40, 'x') (inside libstdc++.so)
//
// and Plain (new Plain, typed by the macro) stays a recorded type.
#include <map>
#include <memory>
#include <string>
#include <vector>

#define NOINLINE __attribute__((noinline))

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Foo { int a[5]; };
struct Bar { double d[3]; };
struct Plain { long v[3]; };
static_assert(sizeof(Foo) == 20 && sizeof(Bar) == 24, "sizes the test relies on");

NOINLINE void grow_vector() {
  std::vector<Foo> v;
  for (int i = 0; i < 5; ++i) v.push_back(Foo{});  // capacities 1, 2, 4, 8: 4 buffers
  keep(v.data());
}

NOINLINE void unique_bars() {
  for (int i = 0; i < 3; ++i) {
    auto p = std::make_unique<Bar>();
    keep(p.get());
  }
  auto array = std::make_unique<Bar[]>(4);
  keep(array.get());
}

NOINLINE void shared_bar() {
  auto p = std::make_shared<Bar>();
  keep(p.get());
}

NOINLINE void map_nodes() {
  std::map<int, Bar> m;
  for (int i = 0; i < 3; ++i) m[i];
  keep(&m);
}

NOINLINE void long_string() {
  std::string s(40, 'x');
  keep(s.data());
}

NOINLINE void plain_new() {
  Plain* p = new Plain();
  keep(p);
  delete p;
}

int main() {
  grow_vector();
  unique_bars();
  shared_bar();
  map_nodes();
  long_string();
  plain_new();
  return 0;
}
