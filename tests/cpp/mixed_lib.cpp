// mixed_lib.cpp: the HeapType-built half of a mixed program (tests/python/
// test_any_binary.py): a shared library compiled with `heaptype --cflags` and linked
// with `heaptype --ldflags --shared`, used by mixed_main.cpp, which is built plain.
struct Widget {
  long id;
  double weight[3];
};  // 32 B

static Widget* g_widgets[10];

extern "C" int make_widgets(int n) {
  for (int i = 0; i < n && i < 10; ++i) g_widgets[i] = new Widget{i, {0, 0, 0}};
  return n < 10 ? n : 10;
}

extern "C" void drop_widgets(int n) {
  for (int i = 0; i < n && i < 10; ++i) delete g_widgets[i];
}
