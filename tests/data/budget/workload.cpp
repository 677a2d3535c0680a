// workload.cpp: a program with exactly known heap figures per type, for budget tests.
//
// Arguments are key=value words, applied in order:
//
//   small=N    N Small  (16 B) all live at once, then freed: peak 16*N, bytes 16*N
//   medium=N   N Medium (32 B) likewise:                      peak 32*N
//   large=N    N Large  (64 B) likewise:                      peak 64*N
//   leak=N     N Leaky  (24 B) never freed:                   leaked 24*N
//   vector=N   a std::vector<Elem> (8 B) reserved to N elements, then freed: one block
//   map=N      a std::map<int, int> of N nodes, then freed: N std::_Rb_tree_node<...>
//   malloc=N   N malloc(1000) blocks, untyped, all live at once, then freed
//   sleep=MS   sleep MS milliseconds (for timeouts)
//   crash=1    abort() right there (SIGABRT): the profile is cut short
//   exit=N     exit with status N right there (after flushing)
//   say=TEXT   append the line TEXT to $HEAPTYPE_LOG, as the runtime does its messages
//              (no allocation: open and write)
//   claim=NAME create $TEST_TMPDIR/NAME, which must not exist yet (exit 4 otherwise), as a
//              test that keeps a fixed file in its temporary directory does
//   release=NAME  remove $TEST_TMPDIR/NAME
//   need=NAME  exit 5 unless $TEST_TMPDIR/NAME exists (a test of a CTest fixture whose
//              setup claims it)
//
// It also speaks GoogleTest's command line, so that budget tests can split it per test
// case like a real GoogleTest binary: --gtest_list_tests lists Alloc.Small (small=100),
// Alloc.Leak (leak=2) and a disabled case; --gtest_filter=Suite.Case runs one case.
//
// It prints one line on stdout, as most programs do (glibc keeps stdout's buffer,
// untyped, live at exit).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <map>
#include <thread>
#include <vector>

struct Small { long a, b; };
struct Medium { long a[4]; };
struct Large { long a[8]; };
struct Leaky { long a[3]; };
struct Elem { long a; };
static_assert(sizeof(Small) == 16 && sizeof(Medium) == 32 && sizeof(Large) == 64, "");
static_assert(sizeof(Leaky) == 24, "");

static inline void keep(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

template <class T> static void live_then_free(long n) {
  T** slots = static_cast<T**>(std::malloc(sizeof(T*) * (n ? n : 1)));  // untyped bookkeeping
  for (long i = 0; i < n; ++i) { slots[i] = new T(); keep(slots[i]); }
  for (long i = 0; i < n; ++i) delete slots[i];
  std::free(slots);
}

static int gtest_main(const char* arg) {
  if (!std::strcmp(arg, "--gtest_list_tests")) {
    std::printf("Running main() from workload.cpp\nAlloc.\n  Small\n  Leak  # GetParam() = 2\n"
                "  DISABLED_Skipped\n");
    return 0;
  }
  const char* filter = arg + std::strlen("--gtest_filter=");
  if (!std::strcmp(filter, "Alloc.Small")) live_then_free<Small>(100);
  else if (!std::strcmp(filter, "Alloc.Leak")) { for (int k = 0; k < 2; ++k) keep(new Leaky()); }
  else { std::fprintf(stderr, "workload: no test case %s\n", filter); return 1; }
  std::printf("[  PASSED  ] 1 test.\n");
  return 0;
}

void say_in_log(const char* text) {
  const char* path = std::getenv("HEAPTYPE_LOG");
  int fd = path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
  if (fd < 0) return;
  if (write(fd, text, std::strlen(text)) < 0 || write(fd, "\n", 1) < 0) {
    // a message that cannot be written is lost, as the runtime's would be
  }
  close(fd);
}

// 0 when $TEST_TMPDIR/name was made by this call; 4 when there is no TEST_TMPDIR or
// someone made the file first.
int claim_in_test_tmpdir(const char* name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  if (!dir || !*dir) { std::fprintf(stderr, "workload: TEST_TMPDIR is not set\n"); return 4; }
  char path[4096];
  std::snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) { std::fprintf(stderr, "workload: cannot claim %s\n", path); return 4; }
  close(fd);
  return 0;
}

// 0 when $TEST_TMPDIR/name exists, else 5.
int need_in_test_tmpdir(const char* name) {
  char path[4096];
  std::snprintf(path, sizeof path, "%s/%s", std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : ".", name);
  if (access(path, F_OK) == 0) return 0;
  std::fprintf(stderr, "workload: %s does not exist\n", path);
  return 5;
}

void release_in_test_tmpdir(const char* name) {
  char path[4096];
  std::snprintf(path, sizeof path, "%s/%s", std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : ".", name);
  unlink(path);
}

int main(int argc, char** argv) {
  if (argc == 2 && (!std::strcmp(argv[1], "--gtest_list_tests") || !std::strncmp(argv[1], "--gtest_filter=", 15)))
    return gtest_main(argv[1]);
  long total = 0;
  for (int i = 1; i < argc; ++i) {
    const char* eq = std::strchr(argv[i], '=');
    if (!eq) { std::fprintf(stderr, "workload: bad argument %s\n", argv[i]); return 2; }
    const size_t len = static_cast<size_t>(eq - argv[i]);
    auto is = [&](const char* key) { return std::strlen(key) == len && !std::strncmp(argv[i], key, len); };
    long n = std::atol(eq + 1);
    total += n;
    if (is("small")) live_then_free<Small>(n);
    else if (is("medium")) live_then_free<Medium>(n);
    else if (is("large")) live_then_free<Large>(n);
    else if (is("leak")) { for (long k = 0; k < n; ++k) keep(new Leaky()); }
    else if (is("vector")) { std::vector<Elem> v; v.reserve(n); keep(v.data()); }
    else if (is("map")) { std::map<int, int> m; for (long k = 0; k < n; ++k) m.emplace(static_cast<int>(k), 0); keep(&m); }
    else if (is("malloc")) {
      void** blocks = static_cast<void**>(std::malloc(sizeof(void*) * (n ? n : 1)));
      for (long k = 0; k < n; ++k) { blocks[k] = std::malloc(1000); keep(blocks[k]); }
      for (long k = 0; k < n; ++k) std::free(blocks[k]);
      std::free(blocks);
    }
    else if (is("sleep")) std::this_thread::sleep_for(std::chrono::milliseconds(n));
    else if (is("crash")) { std::fflush(stdout); std::abort(); }
    else if (is("exit")) { std::printf("workload: exit %ld\n", n); std::exit(static_cast<int>(n)); }
    else if (is("say")) say_in_log(eq + 1);
    else if (is("claim")) { if (int status = claim_in_test_tmpdir(eq + 1)) return status; }
    else if (is("release")) release_in_test_tmpdir(eq + 1);
    else if (is("need")) { if (int status = need_in_test_tmpdir(eq + 1)) return status; }
    else { std::fprintf(stderr, "workload: unknown argument %s\n", argv[i]); return 2; }
  }
  std::printf("workload: done (%ld)\n", total);
  return 0;
}
