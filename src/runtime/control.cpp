// control.cpp: bringing the runtime up and down, the environment, the public C API,
// and fork.
//
// Start-up happens on the first allocation, which may come from any static
// constructor before main(): everything here is zero-initialised data, getenv()
// and system calls. The profile is finished by a destructor that runs after the
// program's static destructors; events after that are written through at once.
#include <dlfcn.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "call_context.hpp"
#include "aggregate.hpp"
#include "child_environment.hpp"
#include "clock.hpp"
#include "diagnostics.hpp"
#include "external_blocks.hpp"
#include "internal_memory.hpp"
#include "attach.hpp"
#include "profile_writer.hpp"
#include "runtime_imports.hpp"
#include "snapshot_signal.hpp"
#include "thread_state.hpp"
#include "exception_types.hpp"
#include "tracker.hpp"

extern "C" char* program_invocation_short_name;
// Defined (weakly) by translation units built with --callstack none (new.hpp).
extern "C" __attribute__((weak)) char heaptype_built_without_callstack;
extern "C" void heaptype_tag_new(const void* p, const void* type_tag, size_t elem_size, size_t elem_align);

// libstdc++'s hook for leak checkers: releases its emergency exception pool and
// other once-per-process buffers. Weak: absent with other standard libraries.
namespace __gnu_cxx {
void __freeres() __attribute__((weak));
}

namespace heaptype {
namespace runtime {

std::atomic<int> g_state{kUninitialized};
std::atomic<bool> g_recording{true};
bool g_keep_released_memory = false;
bool g_finished = false;
std::atomic<bool> g_ordinary{false};

namespace {
bool ordinary_now() {
  return g_state.load() == kActive && g_recording.load() && clock_running() && !g_aggregating && !g_write_addresses &&
         !g_finished && !g_keep_released_memory;
}
}  // namespace

// A store after each change of its conditions; two threads that change different ones
// at once both read them again after their store, so the last store made is of them all.
void refresh_ordinary() {
  for (;;) {
    bool now = ordinary_now();
    g_ordinary.store(now);
    if (ordinary_now() == now) return;
  }
}

namespace {

using format::put_varint;

size_t (*g_libc_usable_size)(void*) = nullptr;

// glibc's malloc_usable_size, behind ours (the program's allocation functions
// come first in the lookup order; RTLD_NEXT is the next definition).
void find_libc_usable_size() {
  if (!g_libc_usable_size)
    g_libc_usable_size = reinterpret_cast<size_t (*)(void*)>(dlsym(RTLD_NEXT, "malloc_usable_size"));
}

const char kDefaultOutput[] = "heaptype.%e.%p.htp";

__thread bool tls_initializing __attribute__((tls_model("initial-exec"))) = false;
bool g_atfork_installed = false;
pid_t g_pid = 0;  // the process this runtime state belongs to
char g_output_pattern[4096];

bool env_flag(const char* name) {
  const char* v = getenv(name);
  return v && *v && std::strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && strcasecmp(v, "no") != 0;
}

uint64_t env_number(const char* name, uint64_t fallback) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long n = strtoull(v, &end, 10);
  return end && !*end && n ? n : fallback;
}

void append(char* out, size_t cap, size_t* used, const char* text) {
  for (; *text && *used + 1 < cap; ++text) out[(*used)++] = *text;
  out[*used] = '\0';
}

// The program's name for %e, copied when the runtime starts: glibc's
// program_invocation_short_name points into argv[0], which a server overwrites with its
// process title ("nginx: master process ..."), so that a forked worker's %e named no
// file that could be created.
char g_program_name[256];

void remember_program_name() {
  if (g_program_name[0]) return;  // started again (heaptype_start), or a forked child: the first one holds
  const char* name = program_invocation_short_name && *program_invocation_short_name
                         ? program_invocation_short_name
                         : "program";
  size_t used = 0;
  append(g_program_name, sizeof g_program_name, &used, name);
}

// Expands %p (pid), %e (program name) and %% in the output pattern. Without %p a
// forked child writes to "<path>.<pid>", so parent and child never share a file.
void expand_output_path(const char* pattern, bool child, char* out, size_t cap) {
  char pid[24];
  pid_text(pid);
  size_t used = 0;
  bool had_pid = false;
  out[0] = '\0';
  for (const char* p = pattern; *p; ++p) {
    if (*p == '%' && p[1] == 'p') {
      append(out, cap, &used, pid);
      had_pid = true;
      ++p;
    } else if (*p == '%' && p[1] == 'e') {
      append(out, cap, &used, g_program_name);
      ++p;
    } else if (*p == '%' && p[1] == '%') {
      append(out, cap, &used, "%");
      ++p;
    } else {
      char c[2] = {*p, '\0'};
      append(out, cap, &used, c);
    }
  }
  if (child && !had_pid) {
    append(out, cap, &used, ".");
    append(out, cap, &used, pid);
  }
}

void flush_one(ThreadState* t, void*) { collect_events(t); }

constexpr uint64_t kAggregateEveryNs = 10'000'000'000ull;
// An aggregated run's ticker starts with the first operator new after this much of the
// run (HEAPTYPE_TICKER_AFTER_MS).
constexpr uint64_t kTickerAfterMs = 50;

// HEAPTYPE_TICKER_AFTER_MS ("0": at once); unset, the mode's default.
uint64_t ticker_wait_ms() {
  const char* setting = getenv("HEAPTYPE_TICKER_AFTER_MS");
  if (!setting || !*setting) return g_aggregating ? kTickerAfterMs : 0;
  return std::strcmp(setting, "0") == 0 ? 0 : env_number("HEAPTYPE_TICKER_AFTER_MS", kTickerAfterMs);
}

void flush_all_threads() { for_each_thread_state(flush_one, nullptr); }

// Everything up to now goes to the file: the threads' records, the aggregated counts
// (after the definitions they name) and the module map.
void write_all_now(uint64_t time) {
  flush_all_threads();
  if (aggregating()) write_aggregate(time);
  writer_modules();
}

// A snapshot mark promises that every event before its time is in the file.
void write_snapshot_mark() {
  uint64_t time = now_tick();
  write_all_now(time);
  uint8_t payload[format::kMaxVarint];
  writer_chunk(format::ChunkKind::kSnapshot, 0, payload, static_cast<size_t>(put_varint(payload, time) - payload));
}

// An aggregated profile holds counts only as of its last set (aggregate.hpp): a process
// that is killed (SIGKILL, or SIGTERM without a handler: no exit) keeps those. Sets are
// written every 10 s, and later every 1% of the run so far: an hour's file holds a few
// hundred sets, not one per second.
void write_aggregate_when_due() {
  static uint64_t last_ns = 0;  // the ticker's alone
  uint64_t now = monotonic_ns(), run = now_tick() * kClockTickNs;  // since the start
  uint64_t interval = run / 100 > kAggregateEveryNs ? run / 100 : kAggregateEveryNs;
  if (now - last_ns < interval) return;
  write_aggregate(now_tick());
  last_ns = now;
}

// On the ticker thread, once a second, when the snapshot signal asks, or when a thread
// handed over a full buffer (thread_state.hpp): the file is never more than about a
// second behind the program, and full buffers are written off the allocating threads.
void periodic_flush() {
  if (g_state.load(std::memory_order_acquire) != kActive) return;
  static uint64_t last_flush_ns = 0;  // the ticker's alone
  uint64_t now = monotonic_ns();
  if (take_snapshot_request()) {
    write_snapshot_mark();
  } else if (now - last_flush_ns >= 1000000000ull) {
    flush_all_threads();
    if (aggregating()) {
      aggregate_retire_when_due();
      write_aggregate_when_due();
    }
  } else {
    write_handed_buffers();
    if (aggregating()) aggregate_retire_when_due();
    return;
  }
  last_flush_ns = now;
}

struct Totals {
  uint64_t allocations, frees, untracked_frees;
  int64_t header_bytes;
};

void add_thread_totals(ThreadState* t, void* context) {
  Totals* totals = static_cast<Totals*>(context);
  totals->allocations += t->allocations.load(std::memory_order_relaxed);
  totals->frees += t->frees.load(std::memory_order_relaxed);
  totals->untracked_frees += t->untracked_frees.load(std::memory_order_relaxed);
  totals->header_bytes += t->other_header_bytes.load(std::memory_order_relaxed);
}

// The END chunk's payload describing this moment; returns its size. The reader
// knows the live blocks from the events.
size_t describe_end(uint8_t (&end)[format::kEndFieldsWithCause * format::kMaxVarint], format::EndCause cause) {
  Totals totals = {0, 0, 0, 0};
  for_each_thread_state(add_thread_totals, &totals);
  uint8_t* p = end;
  p = put_varint(p, totals.allocations);
  p = put_varint(p, totals.frees);
  p = put_varint(p, totals.untracked_frees);
  // The runtime's buffers and tables at their peak; the table of block starts only
  // grows, so what it holds now is its peak.
  uint64_t block_starts = block_starts_resident_bytes();
  p = put_varint(p, bookkeeping_peak_bytes() + block_starts);
  // The registry: the headers of the blocks live now (16 bytes for each tracked
  // block, plus untracked blocks' and over-aligned blocks' padding), and the table
  // of tagged memory the runtime did not allocate.
  int64_t headers = static_cast<int64_t>(kHeaderSize * (totals.allocations - totals.frees)) + totals.header_bytes;
  p = put_varint(p, static_cast<uint64_t>(headers > 0 ? headers : 0) + external_table_bytes());
  // What the runtime's memory was for at its peak (format::EndUse order).
  uint64_t uses[static_cast<unsigned>(MemoryUse::kCount)];
  bookkeeping_peak_uses(uses);
  for (uint64_t bytes : uses) p = put_varint(p, bytes);
  p = put_varint(p, block_starts);
  p = put_varint(p, static_cast<uint64_t>(cause));
  return static_cast<size_t>(p - end);
}

void fork_prepare() {
  if (g_state.load() != kActive) return;
  thread_states_lock_all();
  aggregate_lock_for_fork();    // before the writer's: the aggregated counts write chunks under it
  writer_lock_for_fork();
  bookkeeping_lock_for_fork();  // last: the writer maps memory under its lock
}

void fork_parent() {
  if (g_state.load() != kActive) return;
  bookkeeping_unlock_after_fork();
  aggregate_unlock_after_fork();
  writer_unlock_after_fork();
  thread_states_unlock_all();
}

void fork_child() {
  if (g_state.load() != kActive) return;
  bookkeeping_unlock_after_fork();
  aggregate_reset_in_child();
  writer_forget_in_child();
  ++g_epoch;  // the parent's blocks are untracked here
  external_clear_in_child();
  thread_states_reset_in_child();
  clock_after_fork_in_child();
  char path[4096];
  expand_output_path(g_output_pattern, true, path, sizeof path);
  writer_open_later(path, kClockTickNs);
  g_finished = false;
  refresh_ordinary();
  g_pid = getpid();
}

// glibc's registration of fork handlers, which pthread_atfork calls with the caller's
// __dso_handle. pthread_atfork itself is a wrapper from libc_nonshared.a that the link
// puts at the end of the program's code, past zstd's: running it there made the kernel
// map zstd's pages around it (64 KiB windows, or a whole cached folio) in some runs.
extern "C" int __register_atfork(void (*prepare)(), void (*parent)(), void (*child)(), void* dso_handle)
    __attribute__((weak));
extern "C" void* __dso_handle;

bool register_fork_handlers() {
  if (__register_atfork) return __register_atfork(fork_prepare, fork_parent, fork_child, &__dso_handle) == 0;
  return pthread_atfork(fork_prepare, fork_parent, fork_child) == 0;
}

CallstackMode callstack_mode_from_env() {
  const char* v = getenv("HEAPTYPE_CALLSTACK");
  if (!v || !*v) return &heaptype_built_without_callstack ? CallstackMode::kNone : CallstackMode::kAuto;
  if (std::strcmp(v, "auto") == 0) return CallstackMode::kAuto;
  if (std::strcmp(v, "instrument") == 0) return CallstackMode::kInstrument;
  if (std::strcmp(v, "frame-pointer") == 0) return CallstackMode::kFramePointer;
  if (std::strcmp(v, "unwind") == 0) return CallstackMode::kUnwind;
  if (std::strcmp(v, "none") == 0) return CallstackMode::kNone;
  note("HEAPTYPE_CALLSTACK=", v, ": unknown mode (auto, instrument, frame-pointer, unwind, none); using auto");
  return CallstackMode::kAuto;
}

// HEAPTYPE_MODE: "full" (every event; the default) or "aggregate" (counts, aggregate.hpp).
bool aggregated_mode_from_env() {
  const char* v = getenv("HEAPTYPE_MODE");
  if (!v || !*v || std::strcmp(v, "full") == 0) return false;
  if (std::strcmp(v, "aggregate") == 0) return true;
  note("HEAPTYPE_MODE=", v, ": unknown mode (full, aggregate); using full");
  return false;
}

// The seal's secret: the kernel's random bytes for this process (AT_RANDOM).
uint64_t process_secret() {
  uint64_t secret = 0x2545F4914F6CDD1Dull ^ monotonic_ns();
  if (const void* random = reinterpret_cast<const void*>(getauxval(AT_RANDOM))) {
    uint64_t bytes;
    std::memcpy(&bytes, random, sizeof bytes);
    secret ^= bytes;
  }
  return secret | 1;
}

// Another copy of the runtime (a dlopen()ed plugin linked with its own) finds the
// executable's entry points first in the global scope (the link flags export them):
// that one owns the process and its profile, this one stays out of the way.
bool another_runtime_owns_the_process() {
  void* first = dlsym(RTLD_DEFAULT, "heaptype_tag_new");
  return first && first != reinterpret_cast<void*>(&heaptype_tag_new);
}

// An executable that defines malloc itself (a statically linked mimalloc, jemalloc or
// tcmalloc: Debian's mold, for one) comes before a preloaded runtime in the lookup
// order, and so does an allocator preloaded ahead of it: no allocation reaches the
// runtime, which then never starts, and the program writes no profile. Said once, as
// the runtime is loaded, in the log that `heaptype run` shows (nothing goes into the
// program's output). Linked into the executable, the runtime is the program's malloc,
// or the program's own would not have linked: nothing to say.
__attribute__((constructor)) void note_an_allocator_ahead() {
  if (env_flag("HEAPTYPE_DISABLE")) return;
  void* program_malloc = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info runtime, found, program;
  if (!program_malloc || !dladdr(reinterpret_cast<void*>(&note_an_allocator_ahead), &runtime) ||
      !dladdr(program_malloc, &found) || found.dli_fbase == runtime.dli_fbase)
    return;
  const void* program_headers = reinterpret_cast<const void*>(getauxval(AT_PHDR));
  if (program_headers && dladdr(program_headers, &program) && program.dli_fbase == runtime.dli_fbase) return;
  char pid[24];
  pid_text(pid);
  // Preloaded by `heaptype run`, or a library the program links (`heaptype --ldflags --shared`).
  char rest[4608];
  size_t used = 0;
  bool by_preload = entry_mode() == format::RuntimeMode::kPreloaded;
  append(rest, sizeof rest, &used, "'s, ahead of ");
  if (by_preload) {
    append(rest, sizeof rest, &used, "the preloaded runtime");
  } else {
    append(rest, sizeof rest, &used, "HeapType's runtime in ");
    append(rest, sizeof rest, &used, runtime.dli_fname ? runtime.dli_fname : "a library the program links");
  }
  append(rest, sizeof rest, &used,
         " (an allocator linked into the program, such as mimalloc, jemalloc or tcmalloc, or one preloaded first): "
         "no allocation reaches HeapType, and no profile is written. Fix: build the program ");
  append(rest, sizeof rest, &used, by_preload ? "with HeapType, or with the system's allocator"
                                              : "with the system's allocator");
  note("pid ", pid, ": the program's malloc is ", found.dli_fname && *found.dli_fname ? found.dli_fname : "another module",
       rest);
}

int start_up() {
  find_libc_usable_size();
  find_next_exception_functions();
  if (env_flag("HEAPTYPE_DISABLE") || another_runtime_owns_the_process()) return kDisabled;
  g_pid = getpid();
  note_runtime_only_libraries();
  const char* start = getenv("HEAPTYPE_START");
  if (start && (std::strcmp(start, "stopped") == 0 || std::strcmp(start, "0") == 0))
    g_recording.store(false);  // refresh_ordinary() follows when the state is set
  set_callstack_mode(callstack_mode_from_env());
  const char* pattern = attach_output() ? attach_output() : getenv("HEAPTYPE_OUTPUT");
  g_output_pattern[0] = '\0';
  size_t used = 0;
  if (!pattern || !*pattern) {
    // Under `bazel test` the profile belongs with the test's undeclared outputs.
    const char* test_outputs = getenv("TEST_UNDECLARED_OUTPUTS_DIR");
    if (test_outputs && *test_outputs) {
      append(g_output_pattern, sizeof g_output_pattern, &used, test_outputs);
      append(g_output_pattern, sizeof g_output_pattern, &used, "/");
    }
    pattern = kDefaultOutput;
  }
  append(g_output_pattern, sizeof g_output_pattern, &used, pattern);
  remember_program_name();
  char path[4096];
  expand_output_path(g_output_pattern, false, path, sizeof path);
  writer_set_mode(entry_mode());
  g_aggregating = aggregated_mode_from_env();
  if (g_aggregating) aggregate_start();
  writer_set_aggregated(g_aggregating);
  // Compressed unless asked otherwise; an aggregated profile holds only definitions and
  // counts, and its stream's ~1 MiB would be most of the runtime's memory: compressed
  // once it is large (a program with many call paths), unless asked.
  const char* compress = getenv("HEAPTYPE_COMPRESS");
  if (compress && *compress)
    writer_set_compression(std::strcmp(compress, "0") != 0 ? Compression::kAlways : Compression::kNever);
  else
    writer_set_compression(g_aggregating ? Compression::kWhenLarge : Compression::kAlways);
  // Addresses are the events' (an aggregated profile keeps none).
  if (!writer_open(path, kClockTickNs, env_flag("HEAPTYPE_ADDRESSES") && !g_aggregating)) {
    say("cannot create the profile file ", path, ": ", strerrordesc_np(errno), "; the program runs unprofiled");
    return kDisabled;
  }
  g_seal_secret = process_secret();
  thread_states_init(end_all_probation);
  // Aggregated, a run's first 50 ms go without the ticker thread (clock.hpp): a test
  // case's process of a few milliseconds never starts one. The full mode starts it
  // at once: waiting made alloc_bench's run 10-15% slower (timestamps from the coarse
  // clock at each event, the owner compressing its own buffers), whatever the wait.
  // HEAPTYPE_TICKER_AFTER_MS sets the wait in either mode; a snapshot signal, whose
  // request a waiting ticker would leave to the program's next allocation, starts it.
  uint64_t interval_us = env_number("HEAPTYPE_CLOCK_US", 1000);
  uint64_t wait_ms = ticker_wait_ms();
  if (install_snapshot_signal() || wait_ms == 0)
    start_clock(interval_us, periodic_flush);
  else
    start_clock_deferred(interval_us, periodic_flush, wait_ms * 1000000);
  if (!g_atfork_installed) g_atfork_installed = register_fork_handlers();
  return kActive;
}

}  // namespace

int ensure_initialized() {
  for (;;) {
    int state = g_state.load(std::memory_order_acquire);
    if (state == kActive || state == kDisabled) return state;
    if (state == kStarting) {
      if (tls_initializing) return kStarting;  // our own start-up allocating
#ifdef HEAPTYPE_SANITIZER
      // The start-up's pthread_create waits (under TSan) for the new thread, which
      // allocates while the sanitizer starts it: its blocks pass through untracked.
      return kStarting;
#endif
      sched_yield();
      continue;
    }
    if (!g_state.compare_exchange_strong(state, kStarting)) continue;
    tls_initializing = true;
    capture_log_destination();
    int result = start_up();
    // After start-up, which reads LD_PRELOAD to know how the runtime came in, and
    // whatever its outcome: a disabled runtime's children must not load it either.
    keep_children_unprofiled_if_asked();
    tls_initializing = false;
    g_state.store(result, std::memory_order_release);
    refresh_ordinary();
    return result;
  }
}


size_t libc_usable_size(void* p) {
  if (!g_libc_usable_size) ensure_initialized();
  return g_libc_usable_size ? g_libc_usable_size(p) : 0;
}

bool owns_this_process() { return getpid() == g_pid; }

void finish(bool process_ends, format::EndCause cause) {
  if (g_state.load(std::memory_order_acquire) != kActive || g_finished) return;
  // As heaptrack and valgrind do: what the C++ runtime keeps for the whole process
  // is not the program's leak. A detach leaves a program that goes on: it keeps it.
  // Nor when libstdc++ is the runtime's alone: its pool was never the profile's.
  if (process_ends && __gnu_cxx::__freeres && !runtime_import_allocations_left_out()) {
    g_keep_released_memory = true;
    refresh_ordinary();
    __gnu_cxx::__freeres();
    g_keep_released_memory = false;
    refresh_ordinary();
  }
  if (ThreadState* t = tls_thread_state) {
    // Blocks this thread allocated that other threads freed while they were on
    // probation wait for it to release them (tracker.cpp), as at a thread's exit: a
    // thread's std::thread state, which the thread deletes as it ends, stayed "live
    // at exit" in every program that started threads.
    if (!t->busy) end_all_probation(t);
    report_last_stack_depth(t);  // its last tick
  }
  write_all_now(now_tick());
  uint8_t end[format::kEndFieldsWithCause * format::kMaxVarint];
  writer_chunk(format::ChunkKind::kEnd, 0, end, describe_end(end, cause));
  if (aggregating()) aggregate_note_waiting();
  g_aggregating = false;  // what comes after the END chunk is written as events
  g_finished = true;
  refresh_ordinary();
}

// exec and _exit are async-signal-safe: a handler may call them while its thread is
// inside the runtime, holding a lock that finishing takes. Then the profile is left
// unfinished rather than the process hung.
bool interrupted_the_runtime() {
  ThreadState* t = tls_thread_state;
  return t && t->busy;
}

void finish_before_exec() {
  if (g_state.load(std::memory_order_acquire) != kActive || g_finished || !owns_this_process() ||
      interrupted_the_runtime())
    return;
  Totals totals = {0, 0, 0, 0};
  for_each_thread_state(add_thread_totals, &totals);
  if (!writer_has_file() && totals.allocations == 0 && totals.frees == 0) return;
  finish(true, format::EndCause::kExec);
}

bool dump(const char* path) {
  if (!path || g_state.load(std::memory_order_acquire) != kActive) return false;
  write_all_now(now_tick());
  uint8_t end[format::kEndFieldsWithCause * format::kMaxVarint];
  return writer_copy(path, format::ChunkKind::kEnd, end, describe_end(end, format::EndCause::kDump));
}

}  // namespace runtime
}  // namespace heaptype

namespace rt = heaptype::runtime;

// Runs after the program's static destructors (those are atexit handlers, which
// exit() runs before the .fini_array): what they free is in the profile.
__attribute__((destructor)) static void heaptype_finish_at_exit() { rt::finish(); }

extern "C" {


// _exit() runs no destructors, and it is how a forked child usually ends: finish
// the profile first, then leave exactly as glibc's _exit does.
__attribute__((visibility("default"), noreturn)) void _exit(int status) {
  // A vfork() child shares the parent's memory and ran no fork handlers: finishing
  // the profile there would finish the parent's.
  if (rt::owns_this_process() && !rt::interrupted_the_runtime()) rt::finish();
  for (;;) syscall(SYS_exit_group, status);
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status) { _exit(status); }

__attribute__((visibility("default"))) void heaptype_start(void) {
  if (rt::ensure_initialized() != rt::kActive) return;
  rt::g_recording.store(true);
  rt::refresh_ordinary();
}

__attribute__((visibility("default"))) void heaptype_stop(void) {
  if (rt::ensure_initialized() != rt::kActive) return;
  rt::g_recording.store(false);
  rt::refresh_ordinary();
}

__attribute__((visibility("default"))) int heaptype_dump(const char* path) {
  rt::ensure_initialized();
  return rt::dump(path) ? 1 : 0;
}

__attribute__((visibility("default"))) int heaptype_is_recording(void) {
  return rt::ensure_initialized() == rt::kActive && rt::g_recording.load() ? 1 : 0;
}

__attribute__((visibility("default"))) const char* heaptype_output_path(void) {
  return rt::ensure_initialized() == rt::kActive ? rt::writer_path() : nullptr;
}

__attribute__((visibility("default"))) void heaptype_tag_new(const void* p, const void* type_tag,
                                                             size_t elem_size, size_t elem_align) {
  rt::on_tag_new(p, reinterpret_cast<uintptr_t>(type_tag), elem_size, elem_align);
}

__attribute__((visibility("default"), noinline)) void heaptype_tag_block(const void* p,
                                                                         const void* type_tag,
                                                                         size_t elem_size,
                                                                         size_t count) {
  rt::on_tag_block(p, reinterpret_cast<uintptr_t>(type_tag), elem_size, count,
                   reinterpret_cast<uintptr_t>(__builtin_return_address(0)),
                   reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
}

__attribute__((visibility("default"))) void heaptype_tag_allocation(const void* p, const void* type_tag,
                                                                    size_t elem_size, size_t count) {
  rt::on_tag_allocation(p, reinterpret_cast<uintptr_t>(type_tag), elem_size, count);
}

__attribute__((visibility("default"))) void heaptype_untag(const void* p) { rt::on_untag(p); }

}  // extern "C"
