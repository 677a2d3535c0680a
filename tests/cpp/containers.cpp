// containers.cpp: standard containers of user types, through HeapType's
// std::allocator shim. Built twice: with the shim (rows per element and node
// type) and with `--no-stl-types` (the same blocks, untyped). Prints nothing.
//
//   vector<Token>, reserve(100), 100 push_backs: one block of 100 Token (1,600 B)
//   map<int, Foo>, local: 37 inserts, 10 erased, the other 27 freed at the end
//   map<int, Foo>, leaked with `new`: 5 inserts, live at exit (one typed map object)
//   make_shared<Foo>() x 3, all alive together, then released
//
//   type                                          allocs objects bytes   live at exit
//   Token                                            1     100   1600     0
//   std::_Rb_tree_node<std::pair<int const, Foo>>   42      42   42*56    5 blocks, 5*56
//   std::_Sp_counted_ptr_inplace<Foo, ...>           3       3   3*32     0
//   std::map<int, Foo, ...>                          1       1   48       1 block, 48
//   Foo                                              -  (always inside another block)
#include <map>
#include <memory>
#include <vector>

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Token { int kind; int pos; long value; };
struct Foo { int a; double b; };

static_assert(sizeof(Token) == 16, "");
#ifdef __GLIBCXX__  // libc++ (the type-aware tests' Clang 22) names and sizes its nodes otherwise
static_assert(sizeof(std::_Rb_tree_node<std::pair<const int, Foo>>) == 56, "");
static_assert(sizeof(std::map<int, Foo>) == 48, "");
static_assert(sizeof(std::_Sp_counted_ptr_inplace<Foo, std::allocator<Foo>, __gnu_cxx::_S_atomic>) == 32,
              "");
#endif

int main() {
  {
    std::vector<Token> tokens;
    tokens.reserve(100);
    for (int i = 0; i < 100; ++i) tokens.push_back(Token{i, i, i});
    keep(tokens.data());
  }

  std::map<int, Foo>* leaked = new std::map<int, Foo>;
  keep(leaked);
  {
    std::map<int, Foo> local;
    for (int k = 0; k < 37; ++k) local[k] = Foo{k, 0.5};
    for (int k = 0; k < 10; ++k) local.erase(k * 3);
    for (int k = 0; k < 5; ++k) (*leaked)[k] = Foo{k, 1.5};
    keep(&local);
  }

  {
    std::shared_ptr<Foo> a = std::make_shared<Foo>();
    std::shared_ptr<Foo> b = std::make_shared<Foo>();
    std::shared_ptr<Foo> c = std::make_shared<Foo>();
    keep(a.get()), keep(b.get()), keep(c.get());
  }
  return 0;
}
