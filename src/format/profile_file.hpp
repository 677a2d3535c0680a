// profile_file.hpp: opens a profile and indexes its chunks (the reading half of
// profile_format.hpp, with event_decoder.hpp).
//
// The file is read with pread(2), one chunk at a time, when its records are
// needed: memory does not grow with the file's size. A compressed profile is
// decompressed once into a temporary file first (compressed_stream.hpp). Nothing after a valid header
// throws: a file cut short or damaged keeps every whole chunk before the damage,
// and damage() says what was dropped. Every count and index read from the file is
// checked against the file's size before anything is allocated for it.
#ifndef HEAPTYPE_FORMAT_PROFILE_FILE_HPP
#define HEAPTYPE_FORMAT_PROFILE_FILE_HPP

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "aggregate_counts.hpp"
#include "profile_format.hpp"

namespace heaptype {
namespace format {

// A file that cannot be read as a profile at all; the message names the file.
class ProfileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ChunkRef {
  uint64_t offset;  // of the payload in the file
  uint32_t size;    // of the payload
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
  uint64_t registry_bytes = 0;  // the registry at the end
  std::vector<uint64_t> buffer_uses;  // buffer_bytes by EndUse (empty before version 3)
  EndCause cause = EndCause::kExit;
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
  bool has_addresses() const { return (header_.flags & kFlagAddresses) != 0; }
  uint32_t version() const { return header_.version; }
  RuntimeMode mode() const { return runtime_mode(header_.flags); }
  // The times (clock ticks) of the snapshot marks, in file order.
  const std::vector<uint64_t>& snapshots() const { return snapshots_; }
  const std::string& executable() const { return executable_; }
  const std::vector<std::string>& argv() const { return argv_; }
  // The last module map written (the one at exit knows every dlopen'ed library).
  const std::string& modules() const { return modules_; }
  const std::map<uint32_t, ThreadInfo>& threads() const { return threads_; }
  const EndSummary& end() const { return end_; }
  // Each thread's event chunks, in file order.
  const std::map<uint32_t, std::vector<ChunkRef>>& event_chunks() const { return events_; }
  uint64_t event_bytes() const { return event_bytes_; }

  // Reads a chunk's payload into `out`; false (with error() set) on a read error.
  bool read_payload(const ChunkRef& chunk, std::vector<uint8_t>* out) const;

  // The profile's size on disk (compressed or not).
  uint64_t file_size() const { return compressed_size_ ? compressed_size_ : size_; }
  bool compressed() const { return compressed_size_ != 0; }
  // Counts instead of events (HEAPTYPE_MODE=aggregate): aggregate() holds them.
  bool aggregated() const { return (header_.flags & kFlagAggregated) != 0; }
  const AggregateCounts& aggregate() const { return aggregate_.counts(); }
  // Bytes after the last whole chunk, and why they were dropped ("" if none).
  uint64_t dropped_bytes() const { return dropped_bytes_; }
  const std::string& damage() const { return damage_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  void read_header();
  void inflate(uint64_t from);
  void inflate_after_plain_chunks();
  void index_chunks();
  void read_process_chunk(const ChunkHeader& header, uint64_t offset);
  void add_warning(const std::string& problem);  // "" is none

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;              // of what is read: the file, or its chunks decompressed
  uint64_t compressed_size_ = 0;   // of a compressed file on disk (0: not compressed)
  std::string stream_damage_;      // damage found while decompressing
  FileHeader header_{};
  std::string executable_;
  std::vector<std::string> argv_;
  std::string modules_;
  std::map<uint32_t, ThreadInfo> threads_;
  std::map<uint32_t, std::vector<ChunkRef>> events_;
  uint64_t event_bytes_ = 0;
  EndSummary end_;
  uint64_t dropped_bytes_ = 0;
  std::string damage_;
  std::vector<std::string> warnings_;
  std::vector<uint64_t> snapshots_;
  AggregateReader aggregate_;
};

}  // namespace format
}  // namespace heaptype

#endif
