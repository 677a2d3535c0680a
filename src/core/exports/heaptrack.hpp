// heaptrack.hpp: a profile as heaptrack's data file (the text heaptrack_interpret writes,
// file format 3: heaptrack 1.2 and later), for heaptrack_print and heaptrack_gui.
//
// The file replays the analysis's events in its merged order: `+ i` for an allocation
// and `- i` for a free of allocation info `i` (`a size trace`), `c ms` when the time
// moves on. Everything heaptrack derives from the stream then equals HeapType's figures:
// allocations, peak and leaked bytes, and temporary allocations, since heaptrack calls a
// free temporary when the allocation just before it has its info, and here one info is
// one placement (thread, site), the pair HeapType's rule compares (temporaries.hpp).
// heaptrack_print marks "no allocation open" with info 0, so a free of info 0 that
// follows a free would count as temporary, and heaptrack_gui wants infos allocated
// first in the order of their numbers. So info 0 is the first allocation's alone (its
// placement's other blocks use another info), and when that block is freed just after
// another free, its line moves back to just after the last allocation that was not
// freed next, where it is no temporary either, unless that would lower the peak; then
// heaptrack_print counts one temporary more, as it does on its own files.
//
// Traces (`t ip parent`) are the call paths of the analysis, root first, named by its
// symbolizer (`i ip module function file line ...`: the frames at one pc, innermost
// inlined one first, as heaptrack writes them), so heaptrack needs no debug info of
// its own. The allocated type is the innermost frame, named as the folded export names
// it ("T", "T (inferred)", "(untyped)"), in module "(allocated type)".
//
// A block typed late (MOVE) is counted at its typed site from its allocation: the
// writer keeps the last kWindow events and renames the allocation's line, choosing one
// whose renaming makes or unmakes no temporary. A move further back than that leaves
// the line as it is, and the block's free names the info it was allocated as. One case
// cannot keep both figures: another thread types the block just allocated and the next
// event frees a block of its typed site, with no other line of either placement to
// name; heaptrack then sees a temporary the analysis does not (tests/python/
// test_heaptrack_format.py counts these). Memory is bounded by the window and the
// distinct placements, not by the number of events.
#ifndef HEAPTYPE_CORE_EXPORTS_HEAPTRACK_HPP
#define HEAPTYPE_CORE_EXPORTS_HEAPTRACK_HPP

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "../analysis.hpp"

namespace heaptype {
namespace core {

class HeaptrackWriter : public EventObserver {
 public:
  using Sink = std::function<void(const std::string&)>;
  static constexpr size_t kWindow = 1 << 16;

  // `command`: the profiled command line (heaptrack's `X` line). Text goes to `sink`
  // in pieces of about a MiB.
  HeaptrackWriter(const Analysis& analysis, const std::string& command, Sink sink);

  void allocated(uint64_t key, const Placement& p, bool selected, uint64_t time) override;
  void freed(uint64_t key, const Placement& p, bool selected, uint64_t time) override;
  void moved(uint64_t from, uint64_t to, const Placement& p_to, bool from_selected, bool to_selected,
             uint64_t time) override;
  // After the analysis ran: writes what is left and the final time stamp.
  void finish();

 private:
  enum Kind : uint8_t { kAllocation, kFree, kTime, kDropped };
  struct Pending {
    Kind kind;
    uint64_t value;  // the placement key, or milliseconds for kTime
  };
  struct Info {  // a placement the file names
    uint64_t size = 0;
    uint32_t context = 0;
    uint32_t type_group = 0;
    int64_t live = 0;        // blocks whose allocation line names it, not freed yet
    uint32_t index = kNone;  // its `a` line, once written
    int64_t lines = 0;       // allocation lines that name it (it is defined before a later free)
    std::vector<uint64_t> borrowed;  // placements of blocks moved here too late to rename
  };

  // Events, in the window.
  Info& info(uint64_t key, const Placement& p);
  void push(Kind kind, uint64_t value, uint64_t time);
  Pending* renamable_allocation(uint64_t from, uint64_t to);
  void rename(Pending* line, uint64_t from, uint64_t to);
  void settle_deferred();
  void free_deferred(uint64_t time);
  void write_oldest();
  // Lines.
  void write_allocation(uint64_t key);
  void write_free(uint64_t key);
  void write_first_block_free();
  void event_line(char kind, uint64_t value);
  void release_held();
  // Definitions.
  uint32_t info_index(uint64_t key);
  std::string info_line(const Info& i);
  uint32_t trace_of(uint32_t context, uint32_t type_group);
  uint32_t ip_of(const std::vector<const PathFrame*>& frames);
  uint32_t type_ip(uint32_t type_group);
  uint32_t trace_node(uint32_t parent, uint32_t ip);
  uint32_t string_index(const std::string& text);
  void line(const std::string& text);
  void flush_text(bool all);

  const Analysis& a_;
  Sink sink_;
  std::string text_;
  std::deque<Pending> pending_;  // its elements stay in place while it grows
  // The last event, an allocation another thread typed: renamed at the next event.
  static constexpr uint64_t kNoKey = UINT64_MAX;
  Pending* deferred_ = nullptr;
  uint64_t deferred_from_ = 0;
  uint64_t deferred_to_ = kNoKey;
  uint64_t last_ms_ = 0;
  std::unordered_map<uint64_t, Info> infos_;
  uint32_t infos_written_ = 0;
  // Info 0: the first allocation line's; its placement's other blocks have their own.
  bool first_written_ = false;
  uint64_t first_key_ = 0;
  bool first_live_ = false;
  int64_t first_key_others_live_ = 0;  // the placement's blocks under its own info
  uint32_t last_allocation_ = kNone;   // info of the last `+`/`-` line when it was `+`
  std::vector<uint64_t> info_sizes_;   // by info number
  int64_t live_ = 0;                   // bytes live in the file so far, and their peak
  int64_t peak_ = 0;
  // While the first block lives: the lines since the last place its free could go to
  // (after an allocation not freed next), held back, with the peak before that place
  // and the most bytes live among them.
  std::vector<std::string> held_;
  bool holding_ = false;
  int64_t peak_before_held_ = 0;
  int64_t held_max_live_ = 0;
  std::unordered_map<std::string, uint32_t> strings_;
  std::unordered_map<std::string, uint32_t> ips_;
  std::unordered_map<uint32_t, uint32_t> type_ips_;
  std::unordered_map<uint64_t, uint32_t> trace_nodes_;  // (parent, ip)
  std::unordered_map<uint64_t, uint32_t> traces_;       // (context, type group)
  uint32_t ip_count_ = 0;
  uint32_t trace_count_ = 0;
};

}  // namespace core
}  // namespace heaptype

#endif
