// profile_writer.hpp: appends whole chunks to the profile file.
//
// One lock serialises chunk writes, so each chunk lands contiguous and a reader
// never sees two threads' bytes interleaved. Only flushes take it (once per 64 KiB
// of events per thread), never an allocation.
#ifndef HEAPTYPE_RUNTIME_PROFILE_WRITER_HPP
#define HEAPTYPE_RUNTIME_PROFILE_WRITER_HPP

#include <cstddef>
#include <cstdint>

#include "../format/profile_format.hpp"

namespace heaptype {
namespace runtime {

// Creates `path` and writes the file header, the program and the module map.
// `clock_tick_ns` is the unit of the events' TIME deltas; `addresses`: records
// carry block addresses (format::kFlagAddresses).
bool writer_open(const char* path, uint64_t clock_tick_ns, bool addresses);
// How the runtime came into the process, for the file header (before writer_open).
void writer_set_mode(format::RuntimeMode mode);
// Whether the chunks are compressed (zstd, format::kFlagZstd; the default), before writer_open.
// When the profile is compressed: from its start, never, or once its plain part passed
// kPlainBytesBeforeCompressing (aggregated profiles: small ones stay plain and the
// stream's ~1 MiB is spent only on a program that writes many definitions).
enum class Compression { kAlways, kNever, kWhenLarge };
constexpr uint64_t kPlainBytesBeforeCompressing = uint64_t{256} << 10;
void writer_set_compression(Compression compression);
// Whether the profile holds counts instead of events (format::kFlagAggregated; see
// aggregate.hpp), before writer_open.
void writer_set_aggregated(bool aggregated);
// Closes the file for good (detach): later chunks go nowhere.
void writer_close();

// Like writer_open, but only when the first chunk is written: a forked child that
// goes straight to exec() leaves no empty profile behind.
void writer_open_later(const char* path, uint64_t clock_tick_ns);
// The process is about to give up the rights it has now (a worker's setuid() or
// chroot(), privilege_hooks.cpp): a profile still to be opened is opened now, while
// its directory can be written.
void writer_open_while_allowed();
void writer_chunk(format::ChunkKind kind, uint32_t thread, const void* payload, size_t size);
// Snapshot of the file-backed mappings (/proc/self/maps): the load bias of every
// module, so that addresses can be symbolised after the process is gone. Written
// when the file opens and again only once the dynamic loader has loaded or unloaded
// an object since the last one (dlopen, dlclose).
void writer_modules();
// Copies the file written so far to `path`, then appends one more chunk.
bool writer_copy(const char* path, format::ChunkKind kind, const void* payload, size_t size);
// Fork: hold the writer across fork(); the parent resumes, the child drops the
// parent's file without touching it (it opens its own on first use).
void writer_lock_for_fork();
void writer_unlock_after_fork();
void writer_forget_in_child();
// The program is about to close, or replace by dup2(), its descriptors first..last
// (descriptor_hooks.cpp): `close_them(context)` does it, under the writer's lock, after
// the profile's descriptor moved out of the range, or followed by opening the profile
// again when no number outside it was free. Returns what close_them returned, errno kept.
int writer_around_closing(unsigned first, unsigned last, int (*close_them)(void*), void* context);
const char* writer_path();
// Whether the profile's file is open (a forked child's opens with its first chunk).
bool writer_has_file();

}  // namespace runtime
}  // namespace heaptype

#endif
