// profile_builder.hpp: writes profile files record by record, without a running
// program. The analysis core's exact-truth tests generate event sequences with it
// (threads handing blocks to each other, chunks out of order, files cut short),
// and it documents the writer's side of the format in plain code. It writes version
// 2's records (numbers as they are, no compression): the oldest the reader reads,
// so that every test of the analysis on built profiles keeps that reading tested;
// the runtime writes version 3.
#ifndef HEAPTYPE_FORMAT_PROFILE_BUILDER_HPP
#define HEAPTYPE_FORMAT_PROFILE_BUILDER_HPP

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "profile_format.hpp"

namespace heaptype {
namespace format {

class ProfileBuilder {
 public:
  explicit ProfileBuilder(uint64_t clock_tick_ns = 1000, bool addresses = false, uint64_t pid = 1);

  void program(const std::string& executable, const std::vector<std::string>& argv);
  void modules(const std::string& text);
  void thread(uint32_t thread, uint64_t os_tid, const std::string& name);

  // Definitions; each returns the new number in `thread`'s numbering.
  uint32_t site(uint32_t thread, uint64_t size, uint64_t count, uint64_t type_tag, uint64_t call_site,
                uint64_t node);
  uint32_t derived_site(uint32_t thread, uint32_t base_thread, uint32_t base_site, uint64_t type_tag,
                        uint64_t count);
  uint32_t node(uint32_t thread, uint64_t parent, uint64_t function, uint64_t call_site);

  // Events. `time` is in clock ticks since the start and must not go back
  // within a thread (a TIME record is written when it moves on).
  void alloc(uint32_t thread, uint64_t time, uint32_t site, uint64_t address = 0);
  void free(uint32_t thread, uint64_t time, uint32_t site, uint64_t address = 0);
  void free_last(uint32_t thread, uint64_t time);
  void free_remote(uint32_t thread, uint64_t time, uint32_t owner_thread, uint32_t site, uint64_t address = 0);
  void move(uint32_t thread, uint64_t time, uint32_t owner_thread, uint32_t site, uint32_t new_site,
            uint64_t address = 0);
  // A FINDING record: `thread` released the block of (owner_thread, site) wrongly
  // (see ControlOp::kFinding for kind, a and b).
  void finding(uint32_t thread, uint64_t time, uint64_t kind, uint32_t owner_thread, uint32_t site, uint64_t a,
               uint64_t b, uint64_t call_site, uint64_t node);
  // A STACK record: the thread's stack went `bytes` deep in the tick before `time`.
  void stack(uint32_t thread, uint64_t time, uint64_t bytes);

  // Ends `thread`'s current events chunk: it goes into the file now, after every
  // chunk flushed before it. Threads are flushed in number order by finish().
  void flush(uint32_t thread);
  // Any chunk, as is (for damaged files).
  void raw_chunk(uint8_t kind, uint32_t thread, const std::string& payload);
  void end(uint64_t allocations, uint64_t frees, uint64_t untracked_frees = 0, uint64_t buffer_bytes = 0,
           uint64_t registry_bytes = 0);

  // The whole file so far: header and chunks (pending events are flushed).
  std::string finish();

 private:
  struct Stream {
    std::string pending;
    uint64_t time = 0;
    uint64_t last_address = 0;
    uint32_t sites = 0;
    uint64_t nodes = 1;
  };

  Stream& stream(uint32_t thread) { return streams_[thread]; }
  void put(uint32_t thread, std::initializer_list<uint64_t> values);
  void at(uint32_t thread, uint64_t time);
  void address(uint32_t thread, uint64_t address);
  void chunk(ChunkKind kind, uint32_t thread, const std::string& payload);

  FileHeader header_{};
  std::string body_;
  std::map<uint32_t, Stream> streams_;
};

}  // namespace format
}  // namespace heaptype

#endif
