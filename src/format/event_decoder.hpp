// event_decoder.hpp: decodes one thread's event records (see profile_format.hpp),
// across that thread's chunks, reading one chunk at a time.
#ifndef HEAPTYPE_FORMAT_EVENT_DECODER_HPP
#define HEAPTYPE_FORMAT_EVENT_DECODER_HPP

#include <cstdint>
#include <map>
#include <tuple>
#include <string>
#include <vector>

#include "profile_file.hpp"

namespace heaptype {
namespace format {

// A node of a thread's calling-context tree: `function` was entered from
// `call_site` (a return address in the parent node's function).
struct NodeDef {
  uint64_t parent;       // 0: the thread's root
  uint64_t function;     // 0 when only the return address is known
  uint64_t call_site;
};

// A site as defined in a thread's stream. A derived site takes its size and
// calling context from another thread's site (`base_thread`, `base_site`); its
// `site.size`, `site.call_site` and `site.node` are 0 here.
struct SiteDef {
  Site site;
  bool derived = false;
  uint32_t base_thread = 0;
  uint32_t base_site = 0;
};

// FINDING records of one thread with the same operands, counted (see
// ControlOp::kFinding): memory grows with distinct findings, not with their number.
struct FindingDef {
  uint64_t kind;
  uint32_t thread;      // the block's (thread, site); thread 0: not in the profile
  uint32_t site;
  uint64_t a, b;
  uint64_t call_site;   // of the release
  uint64_t node;        // this thread's calling-context node of the release
  bool operator<(const FindingDef& o) const {
    return std::tie(kind, thread, site, a, b, call_site, node) <
           std::tie(o.kind, o.thread, o.site, o.a, o.b, o.call_site, o.node);
  }
};

struct Event {
  enum Kind : uint8_t { kAlloc, kFree, kMove, kStack };
  Kind kind;
  bool temporary;      // kFree: the stream's record before it was an ALLOC at its site (heaptrack's
                       // rule within one thread; the analysis applies it to the merged order)
  uint32_t stream;     // the thread whose records hold the event
  uint32_t thread;     // the thread whose site the block is at (kAlloc: the stream)
  uint32_t site;       // that thread's site number
  uint32_t new_site;   // kMove: the stream's site the block moves to
  uint64_t time;       // clock ticks since the start
  uint64_t address;    // address mode only, else 0; kStack: the stack's depth in bytes
};

class ThreadEvents {
 public:
  ThreadEvents(const ProfileFile& file, uint32_t thread);

  // The next event; false at the end of the stream. A malformed record ends the
  // stream with error() set; everything before it stands.
  bool next(Event* out);
  // Up to `count` next events into `out`; how many (0 at the end of the stream). With
  // `own`, own[i] says whether out[i] is an allocation or a free of this thread's own
  // site (most are: it costs nothing to say for them).
  size_t next_batch(Event* out, size_t count, uint8_t* own = nullptr);

  const std::string& error() const { return error_; }
  uint32_t thread() const { return thread_; }
  // Definitions so far. nodes()[0] is the root.
  const std::vector<NodeDef>& nodes() const { return nodes_; }
  const std::vector<SiteDef>& sites() const { return sites_; }
  // FINDING records read so far, each with how many times it occurred.
  const std::map<FindingDef, uint64_t>& findings() const { return findings_; }
  // Payload bytes consumed so far (whole chunks), for progress.
  uint64_t bytes_done() const { return bytes_done_; }
  uint64_t time() const { return time_; }

 private:
  // The next chunk when this one is used up; false at the end of the stream.
  bool chunk_ready() { return pos_ != end_ || load_chunk(); }
  bool load_chunk();
  bool fail(const std::string& what);
  bool read(uint64_t* value, const char* record) {
    if (pos_ < end_ && *pos_ < 0x80) {  // most varints are one byte
      *value = *pos_++;
      return true;
    }
    return read_slow(value, record);
  }
  bool read_slow(uint64_t* value, const char* record);
  size_t one_byte_records(Event* out, size_t count);
  bool read_address(uint64_t* address, const char* record);
  bool freed_right_after_allocation(uint32_t site);
  // The site an ALLOC or FREE record names: its number (version 2) or its distance
  // from the newest site (version 3). Inline: one per event.
  bool site_of_record(uint64_t number, const char* record, uint32_t* site) {
    int64_t n = static_cast<int64_t>(number);
    if (distances_) n = sites_.empty() ? -1 : site_from_distance(static_cast<uint32_t>(sites_.size() - 1), number);
    if (n < 0 || static_cast<uint64_t>(n) >= sites_.size()) return undefined_site(n, record);
    *site = static_cast<uint32_t>(n);
    return true;
  }
  bool undefined_site(int64_t n, const char* record);

  const ProfileFile& file_;
  uint32_t thread_;
  const std::vector<ChunkRef>* chunks_;
  bool addresses_;
  bool distances_;  // version 3: sites, nodes and addresses as distances (profile_format.hpp)
  StreamDeltas deltas_;
  size_t chunk_index_ = 0;
  std::vector<uint8_t> buffer_;
  const uint8_t* pos_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint64_t bytes_done_ = 0;
  uint64_t time_ = 0;
  uint64_t last_address_ = 0;
  uint32_t last_alloc_site_ = 0;
  bool last_alloc_open_ = false;  // FREE_LAST may follow
  bool alloc_just_before_ = false;  // no free since the last ALLOC
  std::vector<SiteDef> sites_;
  std::vector<NodeDef> nodes_{NodeDef{0, 0, 0}};
  std::map<FindingDef, uint64_t> findings_;
  std::string error_;
};

}  // namespace format
}  // namespace heaptype

#endif
