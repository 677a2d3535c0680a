// first_member.cpp: constructors that build their first member in place, at the
// object's own address, as kj::Maybe, boost::optional or a union member do: the
// member's placement new reports its type before the new-expression reports the
// object's (tests/python/test_runtime_truth.py). Beside them, arrays of the member's
// type, whose own report looks like the member's (it does not fill the block either).
//
//   first_member N   N times each: new Small[16] (64 B, as a Holder), new Holder (a
//                    4-byte Small first), new Nested (a Small first, then a new Other
//                    made in the constructor, between the two reports), and
//                    std::make_unique<Holder> (whose new-expression, in the standard
//                    library's header, reports nothing: the member's report alone);
//                    all freed. Prints "holders=N nested=N arrays=N others=N uniques=N".
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>

struct Small {
  int v;
};

struct Other {
  long a, b;
};

struct Holder {
  union {
    Small s;
  };
  char rest[60];
  Holder() { new (&s) Small{7}; }
  ~Holder() {}
};

struct Nested {
  union {
    Small s;
  };
  Other* other;
  char rest[48];
  Nested() : other(nullptr) {
    new (&s) Small{5};
    other = new Other{1, 2};
  }
  ~Nested() { delete other; }
};

static_assert(sizeof(Holder) == 64 && sizeof(Nested) == 64 && sizeof(Small[16]) == 64, "one block size");

__attribute__((noinline)) static long make_all(int n) {
  long sum = 0;
  for (int i = 0; i < n; ++i) {
    Small* array = new Small[16];  // first: a Holder typed Small for a moment would add to Small's peak
    Holder* h = new Holder;
    Nested* nested = new Nested;
    array[15].v = i;
    sum += h->s.v + nested->s.v + nested->other->b + array[15].v;
    delete h;
    delete nested;
    delete[] array;
  }
  return sum;
}

__attribute__((noinline)) static long make_unique_holders(int n) {
  long sum = 0;
  for (int i = 0; i < n; ++i) {
    std::unique_ptr<Holder> h = std::make_unique<Holder>();
    sum += h->s.v;
  }
  return sum;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 10;
  long sum = make_all(n) + make_unique_holders(n);
  std::printf("holders=%d nested=%d arrays=%d others=%d uniques=%d sum=%ld\n", n, n, n, n, n, sum);
  return 0;
}
