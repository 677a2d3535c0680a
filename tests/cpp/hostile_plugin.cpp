// hostile_plugin.cpp: a plugin built with HeapType and linked with its own copy of the
// runtime (-shared ... $(heaptype --ldflags)), dlopen()ed by tests/cpp/hostile.cpp.
// Its allocations belong in the executable's profile; its runtime must not start.
struct PluginObject {
  long value[6];
};

extern "C" long make_plugin_objects(long n) {
  long made = 0;
  for (long i = 0; i < n; ++i) {
    PluginObject* p = new PluginObject{{i, 0, 0, 0, 0, 0}};
    made += p->value[0] >= 0 ? 1 : 0;
    delete p;
  }
  return made;
}
