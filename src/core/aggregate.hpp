// aggregate.hpp: replays a profile's events in time order and sums them per type.
//
// The threads' streams are merged by their timestamps; frees name the (thread,
// site) of their block, so the counts are exact whatever the merge order, and only
// the interleaving of different threads' events within one clock tick
// (HEAPTYPE_CLOCK_US) is approximate for the peaks.
#ifndef HEAPTYPE_CORE_AGGREGATE_HPP
#define HEAPTYPE_CORE_AGGREGATE_HPP

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "../format/event_decoder.hpp"
#include "../format/profile_file.hpp"

namespace heaptype {
namespace core {

struct TypeStats {
  uint64_t type_tag = 0;       // a representative tag of the row; 0: untyped
  uint64_t allocations = 0;
  uint64_t objects = 0;        // T[n] counts n; an untyped block counts one
  uint64_t bytes = 0;
  uint64_t live_bytes = 0;     // at the end of the profile
  uint64_t live_blocks = 0;
  uint64_t peak_bytes = 0;     // most live bytes of this type at any moment
  uint64_t peak_time_us = 0;
};

struct Totals {
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t bytes = 0;
  uint64_t live_bytes = 0;
  uint64_t live_blocks = 0;
  uint64_t peak_bytes = 0;
  uint64_t peak_time_us = 0;
  uint64_t peak_live_blocks = 0;  // most blocks live at once
  uint64_t duration_us = 0;
  uint64_t unmatched_frees = 0;  // frees of blocks whose allocation is not in the file
};

// Where allocations came from: a thread's calling-context node and the return
// address of the allocation call inside it.
struct Context {
  uint32_t thread;
  uint64_t node;
  uint64_t call_site;
};

// One type's figures at one context.
struct ContextStats {
  uint32_t context = 0;
  uint32_t row = 0;
  uint64_t allocations = 0;
  uint64_t objects = 0;
  uint64_t bytes = 0;
  uint64_t live_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t live_blocks = 0;
};

struct Aggregate {
  std::vector<TypeStats> rows;
  Totals totals;
  std::vector<Context> contexts;
  std::vector<ContextStats> context_rows;
  std::map<uint32_t, std::vector<format::NodeDef>> nodes;  // each thread's tree
  std::vector<std::string> warnings;
};

// `groups` maps type tags to row numbers 0..n-1 (several tags may share a row, e.g.
// the same type's tag in two shared libraries); tags it lacks get rows of their own.
Aggregate aggregate_by_type(const format::ProfileFile& file,
                            const std::unordered_map<uint64_t, uint32_t>& groups);

}  // namespace core
}  // namespace heaptype

#endif
