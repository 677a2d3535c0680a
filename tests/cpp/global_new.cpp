// global_new.cpp: `::new` spelled with the scope operator, placement and plain,
// must compile with the `new` macro and behave like `new`.
//
//   type     allocations objects bytes  live at exit
//   Scoped        2         2    2*24   1 block, 24
//   char          1        32    32     1 block, 32 (placement ::new does not retype it)
//   Placed        -         -    (placement only: no row)
static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Scoped { long a, b, c; };
struct Placed { int a = 4, b = 5; };
static_assert(sizeof(Scoped) == 24, "");

int main() {
  Scoped* kept = ::new Scoped;
  Scoped* freed = ::new Scoped;
  keep(kept), keep(freed);
  delete freed;

  alignas(Placed) char stack_buffer[sizeof(Placed)];
  Placed* on_stack = ::new (stack_buffer) Placed;
  keep(on_stack);
  char* chars = new char[32];
  keep(chars);
  Placed* in_chars = ::new (chars) Placed;
  keep(in_chars);
  return 0;
}
