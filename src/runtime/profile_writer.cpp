#include "profile_writer.hpp"

#include <fcntl.h>
#include <link.h>
#include <stdio.h>  // renameat2
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <initializer_list>

#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createCCtx_advanced: the stream's memory from map_pages
#include <zstd.h>

#include "clock.hpp"
#include "diagnostics.hpp"
#include "internal_memory.hpp"
#include "libc_next.hpp"
#include "spinlock.hpp"
#include "tracker.hpp"

// zstd's tracing hooks, weak references in its compressor: defined here, and made local
// with zstd's own symbols (cmake/PrivateZstd.cmake), so that a program's tracing hooks
// never see the runtime's stream.
extern "C" {
unsigned long long ZSTD_trace_compress_begin(const void*) { return 0; }
void ZSTD_trace_compress_end(unsigned long long, const void*) {}
}

namespace heaptype {
namespace runtime {

bool g_write_addresses = false;

namespace {

SpinLock g_lock;
int g_fd = -1;       // read without the lock only by writer_around_closing's first test
dev_t g_fd_device;   // what g_fd was opened on: a descriptor the program closed and
ino_t g_fd_inode;    // reused for a file of its own is never written
char g_path[4096];
bool g_open_later = false;
uint32_t g_mode_flags = 0;
uint32_t g_aggregated_flag = 0;  // format::kFlagAggregated in aggregated mode
uint64_t g_clock_tick_ns = 1000;
bool g_write_failed = false;  // the profile's file stopped taking writes (full disk ...)

// A failed write of the profile is said once; the file then holds what came before it
// (whole chunks only: the reader drops a cut chunk) and the program runs on.
void write_failed(int error) {
  if (g_write_failed) return;
  g_write_failed = true;
  say("cannot write the profile file ", g_path, ": ", strerrordesc_np(error),
      "; the profile ends here, the program runs on");
}

bool write_all(int fd, const void* data, size_t size);

// Whether g_fd still holds the file it was opened on. The program's close() and dup2()
// reach writer_around_closing first; a descriptor closed past them (the raw system
// call) and reused by the program for a file of its own is not written to: the
// profile ends there.
bool descriptor_is_the_profile() {
  struct stat now;
  if (fstat(g_fd, &now) == 0 && now.st_dev == g_fd_device && now.st_ino == g_fd_inode) return true;
  if (!g_write_failed) {
    g_write_failed = true;
    say("the program closed the descriptor of the profile file ", g_path,
        "; the profile ends here, the program runs on");
  }
  return false;
}

// g_fd is written under g_lock; writer_around_closing reads it once without.
void set_descriptor(int fd) { __atomic_store_n(&g_fd, fd, __ATOMIC_RELAXED); }

void remember_identity(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return;
  g_fd_device = st.st_dev;
  g_fd_inode = st.st_ino;
}

// --- compression ------------------------------------------------------------------------
//
// The chunks go into one zstd stream (format::kFlagZstd), and each chunk's write ends a
// zstd block (ZSTD_e_flush): the file decodes up to its last chunk whenever it is read,
// by a live view or after a crash. The END chunk ends the frame; a copy (writer_copy)
// ends it too, so that the copy's own last chunk can follow as a frame of its own.
// Level 1 with a 128 KiB window: the call paths a program repeats are close together,
// and the stream costs about 1 MiB (from map_pages, counted as the profile writer's).
constexpr int kZstdLevel = 1;
constexpr int kZstdWindowLog = 17;

Compression g_compression = Compression::kAlways;
ZSTD_CCtx* g_zstd = nullptr;
uint8_t* g_zstd_out = nullptr;
size_t g_zstd_out_capacity = 0;

void* zstd_alloc(void*, size_t size) {
  size_t total = size + 16;
  uint8_t* p = static_cast<uint8_t*>(map_pages(total, MemoryUse::kWriter));
  if (!p) return nullptr;
  std::memcpy(p, &total, sizeof total);
  return p + 16;
}

void zstd_free(void*, void* address) {
  if (!address) return;
  uint8_t* p = static_cast<uint8_t*>(address) - 16;
  size_t total;
  std::memcpy(&total, p, sizeof total);
  unmap_pages(p, total, MemoryUse::kWriter);
}

// The stream, made on first use; false when it cannot be (the profile is then written plain).
bool compressor_ready() {
  if (g_zstd) return true;
  ZSTD_customMem memory = {zstd_alloc, zstd_free, nullptr};
  ZSTD_CCtx* cctx = ZSTD_createCCtx_advanced(memory);
  if (!cctx) return false;
  size_t capacity = ZSTD_CStreamOutSize();
  uint8_t* out = static_cast<uint8_t*>(map_pages(capacity, MemoryUse::kWriter));
  if (!out || ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, kZstdLevel)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, kZstdWindowLog))) {
    unmap_pages(out, capacity, MemoryUse::kWriter);
    ZSTD_freeCCtx(cctx);
    return false;
  }
  g_zstd = cctx;
  g_zstd_out = out;
  g_zstd_out_capacity = capacity;
  return true;
}

// Feeds `size` bytes to the stream and writes what comes out; `mode`: ZSTD_e_continue,
// or ZSTD_e_flush / ZSTD_e_end to write out everything fed so far.
bool compress_out(int fd, const void* data, size_t size, ZSTD_EndDirective mode) {
  ZSTD_inBuffer in = {data, size, 0};
  for (;;) {
    ZSTD_outBuffer out = {g_zstd_out, g_zstd_out_capacity, 0};
    size_t remaining = ZSTD_compressStream2(g_zstd, &out, &in, mode);
    if (ZSTD_isError(remaining)) {
      errno = EIO;
      return false;
    }
    if (out.pos && !write_all(fd, g_zstd_out, out.pos)) return false;
    if (mode == ZSTD_e_continue ? in.pos == in.size : remaining == 0) return true;
  }
}

bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size) {
    ssize_t n = write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = ENOSPC;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool g_compressing = false;  // the open file's chunks go into the zstd stream now
uint64_t g_plain_bytes = 0;  // written to the open file before its stream started (or so far)
bool g_ended = false;        // its END chunk is written: every later chunk ends its own frame
                             // (blocks freed by static destructors), so the file always ends whole

// Starts a fresh stream (a forked child's stream state is its parent's, mid-frame).
bool start_stream() {
  return compressor_ready() && !ZSTD_isError(ZSTD_CCtx_reset(g_zstd, ZSTD_reset_session_only));
}

bool write_plain(int fd, format::ChunkHeader& header, const void* payload, size_t size);

// A plain profile that grew past kPlainBytesBeforeCompressing (Compression::kWhenLarge)
// goes on compressed: a ZSTD_FOLLOWS chunk, then the stream to the end of the file.
void compress_when_large(format::ChunkKind next) {
  if (g_compressing || g_compression != Compression::kWhenLarge || g_plain_bytes < kPlainBytesBeforeCompressing ||
      next == format::ChunkKind::kEnd || g_ended || !start_stream())
    return;
  format::ChunkHeader marker;
  std::memset(&marker, 0, sizeof marker);
  marker.magic = format::kChunkMagic;
  marker.kind = static_cast<uint8_t>(format::ChunkKind::kZstdFollows);
  if (write_plain(g_fd, marker, nullptr, 0))
    g_compressing = true;
  else
    write_failed(errno);
}

void write_chunk_locked(int fd, format::ChunkKind kind, uint32_t thread, const void* payload,
                        size_t size) {
  if (fd == g_fd && !descriptor_is_the_profile()) return;
  if (fd == g_fd) compress_when_large(kind);
  format::ChunkHeader header;
  std::memset(&header, 0, sizeof header);
  header.magic = format::kChunkMagic;
  header.kind = static_cast<uint8_t>(kind);
  header.thread = thread;
  header.payload_size = static_cast<uint32_t>(size);
  if (g_compressing) {
    if (fd == g_fd && kind == format::ChunkKind::kEnd) g_ended = true;
    ZSTD_EndDirective mode = g_ended || fd != g_fd ? ZSTD_e_end : ZSTD_e_flush;
    bool ok = compress_out(fd, &header, sizeof header, ZSTD_e_continue) && compress_out(fd, payload, size, mode);
    if (!ok && fd == g_fd) write_failed(errno);
    return;
  }
  if (fd == g_fd && kind == format::ChunkKind::kEnd) g_ended = true;
  if (!write_plain(fd, header, payload, size) && fd == g_fd) write_failed(errno);
}

bool write_plain(int fd, format::ChunkHeader& header, const void* payload, size_t size) {
  iovec parts[2] = {{&header, sizeof header}, {const_cast<void*>(payload), size}};
  ssize_t total = static_cast<ssize_t>(sizeof header + size);
  ssize_t n;
  do {
    n = writev(fd, parts, 2);
  } while (n < 0 && errno == EINTR);
  bool ok = n >= 0;
  if (ok && n < total) {
    // A short write (full disk, signal): finish it from where it stopped.
    size_t done = static_cast<size_t>(n);
    if (done < sizeof header) {
      ok = write_all(fd, reinterpret_cast<char*>(&header) + done, sizeof header - done);
      done = sizeof header;
    }
    ok = ok && write_all(fd, static_cast<const char*>(payload) + (done - sizeof header), total - done);
  }
  if (ok && fd == g_fd) g_plain_bytes += static_cast<uint64_t>(total);
  return ok;
}

// Reads a whole /proc file into mapped memory; the caller unmaps `*capacity` bytes.
char* read_proc_file(const char* path, size_t* size, size_t* capacity) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  size_t cap = 64 * 1024, used = 0;
  char* buf = static_cast<char*>(map_pages(cap, MemoryUse::kWriter));
  while (buf) {
    if (used == cap) {
      char* bigger = static_cast<char*>(map_pages(cap * 2, MemoryUse::kWriter));
      if (bigger) std::memcpy(bigger, buf, used);
      unmap_pages(buf, cap, MemoryUse::kWriter);
      buf = bigger;
      cap *= 2;
      if (!buf) break;
    }
    ssize_t n = read(fd, buf + used, cap - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    used += static_cast<size_t>(n);
  }
  close_own(fd);
  *size = used;
  *capacity = cap;
  return buf;
}

// Keeps the lines of /proc/self/maps that name a file: only those can hold symbols.
size_t keep_file_backed_lines(char* text, size_t size) {
  size_t out = 0, line_start = 0;
  for (size_t i = 0; i < size; ++i) {
    if (text[i] != '\n') continue;
    const char* line = text + line_start;
    size_t length = i + 1 - line_start;
    const void* slash = std::memchr(line, '/', length);
    if (slash) {
      std::memmove(text + out, line, length);
      out += length;
    }
    line_start = i + 1;
  }
  return out;
}

// The executable and its command line, read once, when the process's first profile
// opens: a forked child's profile names the command that ran, not the process title a
// server writes over its argv later ("nginx: worker process").
char g_program_payload[8192];
size_t g_program_payload_size = 0;

void write_program_chunk() {
  char* payload = g_program_payload;
  size_t used = g_program_payload_size;
  if (!used) {
    ssize_t exe = readlink("/proc/self/exe", payload, sizeof g_program_payload - 1);
    used = exe > 0 ? static_cast<size_t>(exe) : 0;
    payload[used++] = '\0';
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t n = read(fd, payload + used, sizeof g_program_payload - used);
      if (n > 0) used += static_cast<size_t>(n);
      close_own(fd);
    }
    g_program_payload_size = used;
  }
  write_chunk_locked(g_fd, format::ChunkKind::kProgram, 0, payload, used);
}

void remember_path(const char* path) {
  size_t length = std::strlen(path);
  if (length >= sizeof g_path) length = sizeof g_path - 1;
  std::memmove(g_path, path, length);
  g_path[length] = '\0';
}

// The dynamic loader's counts of objects loaded and unloaded so far (dl_iterate_phdr's
// dlpi_adds, dlpi_subs): the module map changes only when they do.
struct LoadCounts {
  unsigned long long adds, subs;
  bool operator==(const LoadCounts& o) const { return adds == o.adds && subs == o.subs; }
};
constexpr LoadCounts kUnknownLoads = {~0ull, ~0ull};
LoadCounts g_modules_written_at = kUnknownLoads;  // the counts before the last map written

int take_load_counts(dl_phdr_info* info, size_t, void* data) {
  *static_cast<LoadCounts*>(data) = {info->dlpi_adds, info->dlpi_subs};
  return 1;  // the first object says it
}

// Called without g_lock: dl_iterate_phdr takes the loader's lock, and a thread that
// holds that one may allocate and want g_lock.
LoadCounts load_counts() {
  LoadCounts counts = kUnknownLoads;
  dl_iterate_phdr(take_load_counts, &counts);
  return counts;
}

// The module map (file-backed lines of /proc/self/maps) as a MODULES chunk. Reading
// /proc/self/maps costs the kernel ~2 us a line (a test process: ~0.1 ms a read), so a
// map written when the loader's counts were `counts` is not written again until they
// move (dlopen, dlclose); kUnknownLoads writes it in any case.
void write_modules_locked(const LoadCounts& counts) {
  if (!(counts == kUnknownLoads) && counts == g_modules_written_at) return;
  size_t size = 0, capacity = 0;
  char* maps = read_proc_file("/proc/self/maps", &size, &capacity);
  if (!maps) return;
  size = keep_file_backed_lines(maps, size);
  write_chunk_locked(g_fd, format::ChunkKind::kModules, 0, maps, size);
  unmap_pages(maps, capacity, MemoryUse::kWriter);
  g_modules_written_at = counts;  // taken before the read: a load since then shows next time
}

// When this process started, in wall-clock nanoseconds (an exec keeps it); 0 when
// /proc does not say. Boot time is now's wall clock less the time since boot.
uint64_t process_start_unix_ns() {
  char stat[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t got = read(fd, stat, sizeof stat - 1);
  close_own(fd);
  if (got <= 0) return 0;
  stat[got] = '\0';
  const char* p = std::strrchr(stat, ')');  // the command name may hold spaces and parentheses
  if (!p) return 0;
  for (int field = 2; field < 22 && *p; ++p)  // starttime is field 22
    if (*p == ' ') ++field;
  uint64_t ticks = 0;
  for (; *p >= '0' && *p <= '9'; ++p) ticks = ticks * 10 + static_cast<uint64_t>(*p - '0');
  long per_second = sysconf(_SC_CLK_TCK);
  if (per_second <= 0) return 0;
  return realtime_ns() - boottime_ns() + ticks * (1000000000ull / static_cast<uint64_t>(per_second));
}

// Whether the profile in `fd` is this very process's, written by its image before an
// exec replaced it (exec_hooks.cpp): this pid, started no earlier than the process (a
// file an earlier process left, whose pid was reused, started before this one).
bool written_by_an_earlier_image(int fd) {
  format::FileHeader header;
  if (pread(fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header)) return false;
  if (std::memcmp(header.magic, format::kFileMagic, sizeof header.magic) != 0 ||
      header.pid != static_cast<uint64_t>(getpid()))
    return false;
  uint64_t started = process_start_unix_ns();
  const uint64_t kTick = 20000000;  // /proc's start time has a 10 ms grain
  return started != 0 && header.start_unix_ns + kTick >= started;
}

// Opens `path` for this process alone: an exclusive flock, held while the process
// lives, says the file is taken. Only then is it emptied, so another HeapType program
// given the same HEAPTYPE_OUTPUT (a forked child that execs one, a second runtime in a
// plugin) cannot truncate a profile being written: EWOULDBLOCK. Nor does an image that
// an exec started truncate the profile of the image before it: EEXIST.
int open_exclusive(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    close_own(fd);
    errno = EWOULDBLOCK;
    return -1;
  }
  if (written_by_an_earlier_image(fd)) {
    close_own(fd);
    errno = EEXIST;
    return -1;
  }
  if (ftruncate(fd, 0) != 0 && errno != EINVAL) {  // EINVAL: not a regular file (/dev/full)
    int error = errno;
    close_own(fd);
    errno = error;
    return -1;
  }
  return fd;
}

// "<path>.<pid>" (attempt 1), then "<path>.<pid>.<attempt>": for a path another live
// process writes, or for the profile an earlier image of this one wrote there.
void path_of_this_process(const char* path, unsigned attempt, char* out, size_t cap) {
  char suffix[52] = ".";
  char pid[24];
  pid_text(pid);
  std::strcat(suffix, pid);
  if (attempt > 1) {
    char number[24];
    decimal_text(attempt, number);
    std::strcat(suffix, ".");
    std::strcat(suffix, number);
  }
  size_t extra = std::strlen(suffix);
  size_t used = std::strlen(path);
  if (used + extra + 1 > cap) used = cap - extra - 1;
  std::memmove(out, path, used);
  std::memcpy(out + used, suffix, extra + 1);
}

// `path` holds the profile this process's image before an exec finished: it moves to
// "<path>.<pid>" (or the next free "<path>.<pid>.<n>"), and this image, the one the
// exec was for (a wrapper script's `exec program`), takes the path. The open file, or
// -1 with errno.
int move_predecessor_aside(const char* path, char* aside, size_t cap) {
  for (unsigned attempt = 1; attempt <= 16; ++attempt) {
    path_of_this_process(path, attempt, aside, cap);
    if (renameat2(AT_FDCWD, path, AT_FDCWD, aside, RENAME_NOREPLACE) == 0) {
      note("this process's image before its exec wrote ", path, "; that profile is now ", aside);
      return open_exclusive(path);
    }
    if (errno != EEXIST) return -1;
  }
  errno = EEXIST;
  return -1;
}

// `loads`: load_counts() taken before g_lock, or kUnknownLoads.
bool open_locked(const char* path, uint64_t clock_tick_ns, const LoadCounts& loads) {
  g_open_later = false;
  g_modules_written_at = kUnknownLoads;  // a new file holds no map yet
  g_write_failed = false;
  char own[sizeof g_path];
  int fd = open_exclusive(path);
  if (fd < 0 && errno == EEXIST) fd = move_predecessor_aside(path, own, sizeof own);
  if (fd < 0 && errno == EWOULDBLOCK) {
    path_of_this_process(path, 1, own, sizeof own);
    note("another process writes ", path, "; this one's profile goes to ", own);
    path = own;
    fd = open_exclusive(path);
  }
  if (fd < 0) return false;
  remember_path(path);
  format::FileHeader header;
  std::memset(&header, 0, sizeof header);
  std::memcpy(header.magic, format::kFileMagic, sizeof header.magic);
  header.version = format::kVersion;
  header.header_size = sizeof header;
  header.pid = static_cast<uint64_t>(getpid());
  header.start_unix_ns = realtime_ns();
  header.clock_tick_ns = clock_tick_ns;
  header.pointer_size = sizeof(void*);
  header.flags = (g_write_addresses ? format::kFlagAddresses : 0) | g_mode_flags | g_aggregated_flag;
  g_compressing = g_compression == Compression::kAlways && start_stream();
  if (g_compressing) header.flags |= format::kFlagZstd;
  g_ended = false;
  set_descriptor(fd);
  remember_identity(fd);
  g_plain_bytes = sizeof header;
  if (!write_all(fd, &header, sizeof header)) write_failed(errno);
  write_program_chunk();
  write_modules_locked(loads);
  return true;
}

void open_if_deferred_locked(const LoadCounts& loads = kUnknownLoads) {
  if (g_fd >= 0 || !g_open_later) return;
  if (!open_locked(g_path, g_clock_tick_ns, loads))
    say("cannot create the profile file ", g_path, ": ", strerrordesc_np(errno), "; the process runs unprofiled");
}

// Whether descriptor `fd` is the profile's and lies in first..last.
bool holds_profile(int fd, unsigned first, unsigned last) {
  return fd >= 0 && static_cast<unsigned>(fd) >= first && static_cast<unsigned>(fd) <= last;
}

// The profile's descriptor duplicated to a number outside first..last (past it, or the
// lowest free one below it), which the profile keeps: the program's call then closes
// or replaces the old number. False when every free number lies in the range.
bool move_descriptor_out_of(unsigned first, unsigned last) {
  for (long from : {last < INT_MAX ? static_cast<long>(last) + 1 : -1L, 0L}) {
    if (from < 0) continue;
    int moved = fcntl(g_fd, F_DUPFD_CLOEXEC, static_cast<int>(from));
    if (moved < 0) continue;
    if (holds_profile(moved, first, last)) {
      close_own(moved);
      continue;
    }
    set_descriptor(moved);
    return true;
  }
  return false;
}

// The program closed every descriptor from some number up (closefrom, close_range), the
// profile's with them: it is opened again by its path, if that is still the same file,
// and takes its lock again.
void reopen_profile() {
  int fd = open(g_path, O_RDWR | O_CLOEXEC);
  struct stat st;
  bool same = fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == g_fd_device && st.st_ino == g_fd_inode &&
              flock(fd, LOCK_EX | LOCK_NB) == 0 && lseek(fd, 0, SEEK_END) >= 0;
  if (same) {
    set_descriptor(fd);
    return;
  }
  if (fd >= 0) close_own(fd);
  set_descriptor(-1);
  if (!g_write_failed) {
    g_write_failed = true;
    say("the program closed the descriptor of the profile file ", g_path,
        " and it could not be opened again; the profile ends here, the program runs on");
  }
}

}  // namespace

bool writer_open(const char* path, uint64_t clock_tick_ns, bool addresses) {
  LoadCounts loads = load_counts();
  LockGuard guard(g_lock);
  g_write_addresses = addresses;
  refresh_ordinary();
  return open_locked(path, clock_tick_ns, loads);
}



void writer_open_later(const char* path, uint64_t clock_tick_ns) {
  LockGuard guard(g_lock);
  remember_path(path);
  g_clock_tick_ns = clock_tick_ns;
  g_open_later = true;
}

void writer_open_while_allowed() {
  if (!__atomic_load_n(&g_open_later, __ATOMIC_RELAXED)) return;
  LockGuard guard(g_lock);
  open_if_deferred_locked();
}

void writer_set_mode(format::RuntimeMode mode) { g_mode_flags = format::mode_flags(mode); }

void writer_set_compression(Compression compression) { g_compression = compression; }

void writer_set_aggregated(bool aggregated) { g_aggregated_flag = aggregated ? format::kFlagAggregated : 0; }

void writer_close() {
  LockGuard guard(g_lock);
  g_open_later = false;
  if (g_fd >= 0) close_own(g_fd);
  set_descriptor(-1);
}

const char* writer_path() { return g_path; }

bool writer_has_file() {
  LockGuard guard(g_lock);
  return g_fd >= 0;
}

void writer_chunk(format::ChunkKind kind, uint32_t thread, const void* payload, size_t size) {
  LockGuard guard(g_lock);
  open_if_deferred_locked();
  if (g_fd >= 0 && !g_write_failed) write_chunk_locked(g_fd, kind, thread, payload, size);
}

void writer_modules() {
  LoadCounts loads = load_counts();
  LockGuard guard(g_lock);
  open_if_deferred_locked(loads);
  if (g_fd >= 0) write_modules_locked(loads);
}

bool writer_copy(const char* path, format::ChunkKind kind, const void* payload, size_t size) {
  LockGuard guard(g_lock);
  open_if_deferred_locked();
  if (g_fd < 0) return false;
  int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return false;
  // The frame ends here: the copy's chunk follows as a frame of its own, and so does
  // the rest of the profile.
  if (g_compressing && !g_write_failed && !compress_out(g_fd, nullptr, 0, ZSTD_e_end)) write_failed(errno);
  char buf[16384];
  off_t offset = 0;
  bool ok = true;
  for (;;) {
    ssize_t n = pread(g_fd, buf, sizeof buf, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    ok = ok && write_all(out, buf, static_cast<size_t>(n));
    offset += n;
  }
  if (ok) write_chunk_locked(out, kind, 0, payload, size);
  close_own(out);
  return ok;
}

void writer_lock_for_fork() { g_lock.lock(); }
void writer_unlock_after_fork() { g_lock.unlock(); }

void writer_forget_in_child() {
  if (g_fd >= 0) close_own(g_fd);
  set_descriptor(-1);
  g_lock.unlock();
}

int writer_around_closing(unsigned first, unsigned last, int (*close_them)(void*), void* context) {
  if (!holds_profile(__atomic_load_n(&g_fd, __ATOMIC_RELAXED), first, last)) return close_them(context);
  LockGuard guard(g_lock);
  bool reopen = holds_profile(g_fd, first, last) && !move_descriptor_out_of(first, last);
  int result = close_them(context);
  int error = errno;
  if (reopen) reopen_profile();
  errno = error;
  return result;
}

}  // namespace runtime
}  // namespace heaptype
