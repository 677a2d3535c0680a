// hostile.cpp: programs that use the runtime the way a hostile (or unlucky) program
// does; tests/python/test_runtime_hostile.py runs each scenario by name:
//
//   signal N        N typed Main objects in a loop while a profiling timer's signal
//                   handler allocates a typed Sig object each time it fires, also when
//                   it interrupts the runtime; prints "signals=K" (K Sig objects)
//   signal-free N   the same, and the handler deletes the Sig of the time before: one
//                   Sig is live at the end
//   signal-tagged N the same, and the handler's block is a malloc() of a 16-byte header
//                   of its own and 3 Tagged, reported by heaptype_tag_allocation (as a
//                   copy-on-write string's allocator reports its characters); kept
//   fork-exec N     forks a child that execs this program ("alone 7"), with the same
//                   environment, then makes N typed Main objects and waits for it
//   alone N         N typed Main objects
//   plugin PATH N   dlopen()s PATH and calls its make_plugin_objects(N)
//   throw N         N `new Thrower` whose constructor throws (each is caught)
//   unwind-free N   N times: a std::promise dropped unset, whose future's get() throws
//                   broken_promise, freeing the shared state and its result while the
//                   exception propagates (a completed allocation, freed from another
//                   frame); and a Holder whose destructor deletes its Main as an
//                   exception leaves the function that made it
//   uncaught N      makes N Main objects, then throws a Sig nothing catches; the
//                   terminate handler prints "frames=K", the frames of its stack
//                   (backtrace(), the unwinder's count, as a program's own crash report
//                   takes it), and exits with 3
//   free-array N    N times: `new Counted[3]` (an array with a cookie), released with free()
//   exec HOW N PATH [ARG...]  N typed Main objects, kept, then PATH replaces this
//                   image through exec HOW: execl, execlp, execle, execv, execvp, execvpe
//                   or execve (with ARGs: execv only); prints "exec failed" if it returns
//   close-all HOW N DIR   N typed Main objects, then closes every descriptor from 3 up
//                   the way a daemon does (HOW: loop, a close() of each number below
//                   1024; closefrom; close_range; dup2, /dev/null put over each number
//                   below 64 first), opens 8 files of its own in DIR, makes N more Main
//                   objects, writes a line to each file and reads them back: prints
//                   "files intact" or what a file held instead
//   fork-drop N     forks a child that gives up root (setgroups, setgid and setuid to
//                   65534, as a server's worker does) and makes N Main objects; the
//                   parent waits and makes N; prints "dropped" or why not
//   wait-term N     makes N Main objects, prints "waiting", and waits for SIGTERM, on
//                   which it prints "terminated" and exits normally (as a server stops);
//                   SIGALRM ends it after 60 s
//   late-fork N     makes a Main object, sleeps a second, then forks a child that
//                   deletes it and makes N Main objects; the parent waits, makes N and
//                   deletes its own
//   daemon N FILE   goes into the background as a daemon does (fork, the parent
//                   returns; setsid, fork, the middle process exits; stdio onto
//                   /dev/null), makes N Main objects, writes its pid into FILE and
//                   waits for SIGTERM holding one Sig, on which it frees the Sig,
//                   appends "terminated" to FILE and exits normally; SIGALRM ends it
//                   after 60 s
//   retitle N       writes a process title over argv[0] ("worker: a/b c", as a server
//                   does), then forks a child that makes N Main objects; the parent
//                   waits and makes N
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>

struct Main {
  long value[3];
};
struct Sig {
  long value[5];
};
struct Thrower {
  explicit Thrower(long v) : value{v, v} {
    if (v >= 0) throw v;
  }
  long value[2];
};
struct Holder {
  explicit Holder(long i) : main(new Main{{i, i, i}}) {}
  ~Holder() { delete main; }
  Main* main;
};
struct Counted {
  ~Counted() { value = 0; }  // not trivially destructible: new[] puts a cookie in front
  long value = 1;
};

namespace {

std::atomic<long> g_signals{0};

bool g_free_previous = false;
bool g_tagged_blocks = false;

struct Tagged {
  long value;
};

// An allocator's block: a header of its own, then 3 Tagged, as it reports them.
void make_tagged_block() {
  constexpr size_t kOwnHeader = 16;
  char* block = static_cast<char*>(std::malloc(kOwnHeader + 3 * sizeof(Tagged)));
#ifdef HEAPTYPE_NEW_HPP  // built with HeapType (a plain build's block stays untyped)
  heaptype_tag_allocation(block, heaptype::tag_of<Tagged>(), sizeof(Tagged), 3);
#endif
  reinterpret_cast<Tagged*>(block + kOwnHeader)->value = 5;
  g_signals.fetch_add(1, std::memory_order_relaxed);
  static char* volatile keep;
  keep = block;  // leaked on purpose, like the Sig objects: counted at exit
}

void on_profiling_timer(int) {
  if (g_tagged_blocks) return make_tagged_block();
  Sig* s = new Sig{{1, 2, 3, 4, 5}};
  if (s->value[4] == 5) g_signals.fetch_add(1, std::memory_order_relaxed);
  // Kept alive (signal): the test checks that every one was typed.
  static Sig* volatile keep;
  if (g_free_previous) delete keep;
  keep = s;
}

long make_mains(long n) {
  long sum = 0;
  for (long i = 0; i < n; ++i) {
    Main* m = new Main{{i, i, i}};
    sum += m->value[1];
    delete m;
  }
  return sum;
}

int run_signal(long n) {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_profiling_timer;
  sigaction(SIGPROF, &action, nullptr);
  itimerval every = {{0, 50}, {0, 50}};  // as often as the kernel allows: CPU time
  setitimer(ITIMER_PROF, &every, nullptr);
  long sum = make_mains(n);
  itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, nullptr);
  std::printf("signals=%ld sum=%ld\n", g_signals.load(), sum);
  return 0;
}

int run_fork_exec(const char* self, long n) {
  pid_t child = fork();
  if (child == 0) {
    execl(self, self, "alone", "7", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);  // the child has started (and finished) before the parent's events
  make_mains(n);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

int run_plugin(const char* path, long n) {
  void* plugin = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!plugin) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  auto make = reinterpret_cast<long (*)(long)>(dlsym(plugin, "make_plugin_objects"));
  long made = make ? make(n) : -1;
  make_mains(n);
  std::printf("made=%ld\n", made);
  return 0;
}

int run_throw(long n) {
  long caught = 0;
  for (long i = 0; i < n; ++i) {
    try {
      Thrower* t = new Thrower(i);
      delete t;
    } catch (long) {
      ++caught;
    }
  }
  std::printf("caught=%ld\n", caught);
  return 0;
}

__attribute__((noinline)) void throw_holding(long i) {
  Holder held(i);
  throw i;
}

int run_unwind_free(long n) {
  long caught = 0;
  for (long i = 0; i < n; ++i) {
    try {
      std::future<void> result;
      {
        std::promise<void> dropped;
        result = dropped.get_future();
      }
      result.get();
    } catch (const std::future_error&) {
      ++caught;
    }
    try {
      throw_holding(i);
    } catch (long) {
      ++caught;
    }
  }
  std::printf("caught=%ld\n", caught);
  return 0;
}

void print_stack_depth_and_exit() {
  void* frames[128];
  std::printf("frames=%d\n", backtrace(frames, 128));
  std::fflush(stdout);
  std::_Exit(3);
}

__attribute__((noinline)) void throw_uncaught() { throw Sig{{1, 2, 3, 4, 5}}; }

int run_uncaught(long n) {
  std::set_terminate(print_stack_depth_and_exit);
  make_mains(n);
  throw_uncaught();
  return 0;
}

int run_free_array(long n) {
  long sum = 0;
  for (long i = 0; i < n; ++i) {
    Counted* a = new Counted[3];
    sum += a[2].value;
    std::free(a);  // wrong: delete[] a
  }
  std::printf("freed=%ld\n", sum);
  return 0;
}

// The image ends in an exec with N Main objects live: the profile must be finished
// with them (the process has no exit of its own).
int run_exec(const char* how, long n, const char* path, char** args) {
  for (long i = 0; i < n; ++i) new Main{{i, i, i}};  // held: live when the image is replaced
  if (*args) {  // PATH and its arguments, as this program's argv holds them
    execv(path, args - 1);
    std::printf("exec failed\n");
    return 1;
  }
  char* const argv[] = {const_cast<char*>(path), nullptr};
  if (std::strcmp(how, "execl") == 0) execl(path, path, static_cast<char*>(nullptr));
  if (std::strcmp(how, "execlp") == 0) execlp(path, path, static_cast<char*>(nullptr));
  if (std::strcmp(how, "execle") == 0) execle(path, path, static_cast<char*>(nullptr), environ);
  if (std::strcmp(how, "execv") == 0) execv(path, argv);
  if (std::strcmp(how, "execvp") == 0) execvp(path, argv);
  if (std::strcmp(how, "execvpe") == 0) execvpe(path, argv, environ);
  if (std::strcmp(how, "execve") == 0) execve(path, argv, environ);
  std::printf("exec failed\n");
  return 1;
}

void close_descriptors(const char* how) {
  if (std::strcmp(how, "loop") == 0) {
    for (int fd = 3; fd < 1024; ++fd) close(fd);
  } else if (std::strcmp(how, "closefrom") == 0) {
    closefrom(3);
  } else if (std::strcmp(how, "close_range") == 0) {
    close_range(3, ~0u, 0);
  } else if (std::strcmp(how, "dup2") == 0) {
    int null = open("/dev/null", O_RDONLY);
    for (int fd = 3; fd < 64; ++fd)
      if (fd != null) dup2(null, fd);
    for (int fd = 3; fd < 64; ++fd) close(fd);
  }
}

int run_close_all(const char* how, long n, const char* dir) {
  make_mains(n);
  close_descriptors(how);
  constexpr int kFiles = 8;
  int files[kFiles];
  char path[4096];
  for (int k = 0; k < kFiles; ++k) {
    std::snprintf(path, sizeof path, "%s/own%d.txt", dir, k);
    files[k] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  }
  make_mains(n);
  const char line[] = "the program's own line\n";
  bool intact = true;
  for (int k = 0; k < kFiles; ++k) {
    if (write(files[k], line, sizeof line - 1) != static_cast<ssize_t>(sizeof line - 1)) intact = false;
    char back[256];
    ssize_t got = pread(files[k], back, sizeof back, 0);
    if (got != static_cast<ssize_t>(sizeof line - 1) || std::memcmp(back, line, sizeof line - 1) != 0) {
      std::printf("file %d holds %zd bytes\n", k, got);
      intact = false;
    }
    close(files[k]);
  }
  if (intact) std::printf("files intact\n");
  return intact ? 0 : 1;
}

// Runs `child` in a forked child, which exits with its status; the parent waits and
// makes n Main objects. The parent's status: the child's.
int in_child_then_mains(int (*child)(long), long n) {
  pid_t pid = fork();
  if (pid == 0) std::exit(child(n));
  int status = 0;
  waitpid(pid, &status, 0);
  make_mains(n);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

int drop_root_then_mains(long n) {
  constexpr unsigned kNobody = 65534;
  if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) {
    std::printf("cannot drop: %s\n", std::strerror(errno));
    return 3;
  }
  make_mains(n);
  std::printf("dropped\n");
  return 0;
}

volatile sig_atomic_t g_terminated = 0;

void on_term(int) { g_terminated = 1; }

// SIGTERM sets g_terminated, and is blocked but in sigsuspend(returned mask), so that
// no wakeup is lost between the test and the wait.
sigset_t catch_term() {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_term;
  sigaction(SIGTERM, &action, nullptr);
  sigset_t term, before;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, &before);
  return before;
}

int run_wait_term(long n) {
  sigset_t before = catch_term();
  make_mains(n);
  alarm(60);  // never left waiting by a test that failed
  std::printf("waiting\n");
  std::fflush(stdout);
  while (!g_terminated) sigsuspend(&before);
  std::printf("terminated\n");
  return 0;
}

// The daemon's steps, each as the daemon(3) of the C libraries takes it.
int run_daemon(long n, const char* file) {
  if (fork() != 0) return 0;  // the process started returns at once
  setsid();
  if (fork() != 0) _exit(0);
  int null = open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
  close(null);
  sigset_t before = catch_term();
  make_mains(n);
  Sig* held = new Sig{{1, 2, 3, 4, 5}};  // live while it serves: what a live view shows
  alarm(60);
  char ready[256];
  std::snprintf(ready, sizeof ready, "%s.tmp", file);
  FILE* out = std::fopen(ready, "w");
  std::fprintf(out, "%d\n", static_cast<int>(getpid()));
  std::fclose(out);
  rename(ready, file);  // whole, or not there
  while (!g_terminated) sigsuspend(&before);
  delete held;
  out = std::fopen(file, "a");
  std::fprintf(out, "terminated\n");
  std::fclose(out);
  return 0;
}

Main* g_inherited = nullptr;

int delete_inherited_then_mains(long n) {
  delete g_inherited;  // the parent's block: the child's profile never saw it allocated
  return make_mains(n) >= 0 ? 0 : 1;
}

int run_late_fork(long n) {
  g_inherited = new Main{{1, 2, 3}};
  sleep(1);
  int status = in_child_then_mains(delete_inherited_then_mains, n);
  delete g_inherited;
  return status;
}

int mains_in_child(long n) { return make_mains(n) >= 0 ? 0 : 1; }

int run_retitle(char* argv0, long n) {
  const char title[] = "worker: a/b c";
  size_t room = std::strlen(argv0);
  std::memset(argv0, 0, room);
  std::memcpy(argv0, title, room < sizeof title - 1 ? room : sizeof title - 1);
  return in_child_then_mains(mains_in_child, n);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* mode = argv[1];
  if (std::strcmp(mode, "signal") == 0) return run_signal(std::atol(argv[2]));
  if (std::strcmp(mode, "signal-free") == 0) {
    g_free_previous = true;
    return run_signal(std::atol(argv[2]));
  }
  if (std::strcmp(mode, "signal-tagged") == 0) {
    g_tagged_blocks = true;
    return run_signal(std::atol(argv[2]));
  }
  if (std::strcmp(mode, "fork-exec") == 0) return run_fork_exec(argv[0], std::atol(argv[2]));
  if (std::strcmp(mode, "alone") == 0) return make_mains(std::atol(argv[2])) >= 0 ? 0 : 1;
  if (std::strcmp(mode, "throw") == 0) return run_throw(std::atol(argv[2]));
  if (std::strcmp(mode, "free-array") == 0) return run_free_array(std::atol(argv[2]));
  if (std::strcmp(mode, "unwind-free") == 0) return run_unwind_free(std::atol(argv[2]));
  if (std::strcmp(mode, "uncaught") == 0) return run_uncaught(std::atol(argv[2]));
  if (std::strcmp(mode, "plugin") == 0 && argc > 3) return run_plugin(argv[2], std::atol(argv[3]));
  if (std::strcmp(mode, "fork-drop") == 0) return in_child_then_mains(drop_root_then_mains, std::atol(argv[2]));
  if (std::strcmp(mode, "wait-term") == 0) return run_wait_term(std::atol(argv[2]));
  if (std::strcmp(mode, "late-fork") == 0) return run_late_fork(std::atol(argv[2]));
  if (std::strcmp(mode, "daemon") == 0 && argc > 3) return run_daemon(std::atol(argv[2]), argv[3]);
  if (std::strcmp(mode, "retitle") == 0) return run_retitle(argv[0], std::atol(argv[2]));
  if (std::strcmp(mode, "close-all") == 0 && argc > 4) return run_close_all(argv[2], std::atol(argv[3]), argv[4]);
  if (std::strcmp(mode, "exec") == 0 && argc > 4) return run_exec(argv[2], std::atol(argv[3]), argv[4], argv + 5);
  return 2;
}
