// profile_reader.hpp: reads a profile file back (the other half of profile_format.hpp).
//
// ProfileFile maps the file and indexes its chunks; it never throws on a file cut
// short or damaged after its header: it keeps every whole chunk before the damage
// and says what it dropped. ThreadEvents decodes one thread's records in order.
#ifndef HEAPTYPE_FORMAT_PROFILE_READER_HPP
#define HEAPTYPE_FORMAT_PROFILE_READER_HPP

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "profile_format.hpp"

namespace heaptype {
namespace format {

class ProfileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ChunkRef {
  ChunkKind kind;
  uint32_t thread;
  const uint8_t* data;
  size_t size;
};

struct ThreadInfo {
  uint32_t number = 0;
  uint64_t os_tid = 0;
  std::string name;
};

struct EndSummary {
  bool present = false;
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t untracked_frees = 0;
  uint64_t buffer_bytes = 0;    // peak bytes of the runtime's buffers and tables
  uint64_t registry_bytes = 0;  // the registry's shadow table at the end
};

struct LiveBlock {
  uint32_t thread;
  uint64_t number;
};

class ProfileFile {
 public:
  // Throws ProfileError when the file cannot be opened or is not a HeapType profile.
  explicit ProfileFile(const std::string& path);
  ~ProfileFile();
  ProfileFile(const ProfileFile&) = delete;
  ProfileFile& operator=(const ProfileFile&) = delete;

  const std::string& path() const { return path_; }
  const FileHeader& header() const { return header_; }
  const std::string& executable() const { return executable_; }
  const std::vector<std::string>& argv() const { return argv_; }
  // The last module map written (the one at exit knows every dlopen'ed library).
  const std::string& modules() const { return modules_; }
  const std::map<uint32_t, ThreadInfo>& threads() const { return threads_; }
  const EndSummary& end() const { return end_; }
  const std::vector<LiveBlock>& live_at_finish() const { return live_; }
  // Each thread's event chunks, in file order.
  const std::map<uint32_t, std::vector<ChunkRef>>& event_chunks() const { return events_; }

  uint64_t file_size() const { return size_; }
  // Bytes after the last whole chunk, and why they were dropped ("" if none).
  uint64_t dropped_bytes() const { return dropped_bytes_; }
  const std::string& damage() const { return damage_; }
  std::vector<std::string>& warnings() { return warnings_; }

 private:
  void index_chunks();
  void read_chunk(const ChunkRef& chunk);

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  FileHeader header_{};
  std::string executable_;
  std::vector<std::string> argv_;
  std::string modules_;
  std::map<uint32_t, ThreadInfo> threads_;
  std::map<uint32_t, std::vector<ChunkRef>> events_;
  std::vector<LiveBlock> live_;
  EndSummary end_;
  uint64_t dropped_bytes_ = 0;
  std::string damage_;
  std::vector<std::string> warnings_;
};

// A node of a thread's calling-context tree: `function` was entered from
// `call_site` (a return address in the parent node's function).
struct NodeDef {
  uint64_t parent;       // 0: the thread's root
  uint64_t function;     // 0 when only the return address is known
  uint64_t call_site;
};

struct Event {
  enum Kind : uint8_t { kAlloc, kFree, kRetype, kName } kind;
  uint32_t thread;       // the thread that allocated the block concerned
  uint64_t number;       // the block's allocation number within that thread
  uint64_t time_us;
  const Site* site;      // kAlloc: the block's site (valid as long as the stream)
  uint32_t site_number;  // kAlloc: the site's number within the thread
  uint64_t address;      // kAlloc
  uint64_t type_tag;     // kAlloc: the site's type; kRetype, kName: the new type
  uint64_t count;        // kAlloc: the site's count; kName: objects; kRetype: the
                         // array cookie's count word
  uint64_t elem_size;    // kRetype
  uint64_t offset;       // kRetype: where the object starts in the block
};

// Decodes the records of one thread, across its chunks.
class ThreadEvents {
 public:
  ThreadEvents(uint32_t thread, const std::vector<ChunkRef>& chunks);
  // False at the end of the stream. A malformed record ends the stream with
  // error() set.
  bool next(Event* out);
  const std::string& error() const { return error_; }
  uint32_t thread() const { return thread_; }
  // The calling-context nodes defined so far; index 0 is the root.
  const std::vector<NodeDef>& nodes() const { return nodes_; }

 private:
  bool load_chunk();
  bool fail(const char* what);

  uint32_t thread_;
  const std::vector<ChunkRef>& chunks_;
  size_t chunk_index_ = 0;
  const uint8_t* pos_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint64_t next_number_ = 0;
  uint64_t last_address_ = 0;
  uint64_t time_us_ = 0;
  std::deque<Site> sites_;  // a deque: events point into it
  std::vector<NodeDef> nodes_{NodeDef{0, 0, 0}};
  std::string error_;
};

}  // namespace format
}  // namespace heaptype

#endif
