// mixed_main.cpp: the plain half of a mixed program: built without HeapType, it links
// libmixed (mixed_lib.cpp, built with HeapType), which brings the runtime. Makes 10
// Widgets through the library and 7 blocks of 48 B in make_plain(), frees them all.
struct Plain {
  char bytes[48];
};

extern "C" int make_widgets(int n);
extern "C" void drop_widgets(int n);

static Plain* g_plain[7];

__attribute__((noinline)) void make_plain() {
  for (Plain*& p : g_plain) p = new Plain();
}

int main() {
  int made = make_widgets(10);
  make_plain();
  for (Plain* p : g_plain) delete p;
  drop_widgets(made);
  return made == 10 ? 0 : 1;
}
