// held_blocks.cpp: a program built WITHOUT HeapType that holds known blocks while it
// waits, for the tests of preloading, of reading a running program's profile, of
// the live view and of attach (tests/python/test_any_binary.py).
//
// It allocates only where the steps below say, and uses read(2)/write(2) instead of
// stdio, so no buffer of its own appears in a profile. Each step waits for one line
// on stdin and answers with one line on stdout:
//   start:       5 blocks of 1000 B (malloc)                       -> "ready <pid>"
//   "alloc":     32 Held (256 B, new) in make_held; free 3 of the 5 -> "allocated"
//   "free":      delete 16 Held                                    -> "freed"
//   "end":       malloc/free 100 blocks of 64 B, delete the other
//                16 Held, free the last 2 of the 5                  -> "done", exit 0
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

struct Held {
  char bytes[256];
};

static Held* g_held[32];
static void* g_early[5];

static void say(const char* text) {
  if (write(STDOUT_FILENO, text, strlen(text)) < 0) _exit(3);
}

// Waits for one line on stdin; false at end of input.
static bool wait_for_line() {
  char c;
  for (;;) {
    ssize_t n = read(STDIN_FILENO, &c, 1);
    if (n <= 0) return false;
    if (c == '\n') return true;
  }
}

__attribute__((noinline)) Held* make_held(int i) {
  Held* h = new Held;
  memset(h->bytes, i, sizeof h->bytes);
  return h;
}

int main() {
  for (void*& p : g_early) p = malloc(1000);
  char line[64];
  snprintf(line, sizeof line, "ready %d\n", static_cast<int>(getpid()));
  say(line);
  if (!wait_for_line()) return 1;
  for (int i = 0; i < 32; ++i) g_held[i] = make_held(i);
  for (int i = 0; i < 3; ++i) free(g_early[i]);
  say("allocated\n");
  if (!wait_for_line()) return 1;
  for (int i = 0; i < 16; ++i) delete g_held[i];
  say("freed\n");
  if (!wait_for_line()) return 1;
  long sum = 0;
  for (int i = 0; i < 100; ++i) {
    char* p = static_cast<char*>(malloc(64));
    asm volatile("" : : "r"(p) : "memory");  // the compiler may not drop the pair
    p[0] = static_cast<char>(i);
    sum += p[0];
    free(p);
  }
  for (int i = 16; i < 32; ++i) sum += g_held[i]->bytes[0], delete g_held[i];
  for (int i = 3; i < 5; ++i) free(g_early[i]);
  say(sum == 4950 + 376 ? "done\n" : "wrong\n");
  return 0;
}
