#include "aggregate_counts.hpp"

#include "profile_format.hpp"

namespace heaptype {
namespace format {

namespace {

// Sites in one chunk: the runtime writes at most 2,048 (aggregate.cpp); a count that
// cannot fit the payload is damage.
constexpr uint64_t kFieldsPerSite = 4;

}  // namespace

std::string AggregateReader::add_tallies(uint32_t thread, const uint8_t* begin, const uint8_t* end) {
  std::string problem = read_tallies(thread, begin, end);
  if (!problem.empty()) open_damaged_ = true;  // the set it belongs to is left out
  return problem;
}

std::string AggregateReader::read_tallies(uint32_t thread, const uint8_t* begin, const uint8_t* end) {
  const uint8_t* p = begin;
  uint64_t first = 0, count = 0;
  if (!get_varint(&p, end, &first) || !get_varint(&p, end, &count))
    return "a TALLIES chunk of thread " + std::to_string(thread) + " is damaged";
  if (count > static_cast<uint64_t>(end - p) / kFieldsPerSite || first + count > UINT32_MAX)
    return "a TALLIES chunk of thread " + std::to_string(thread) + " counts more sites than it holds";
  // A thread's chunks in a set follow each other from site 0 (aggregate.cpp): the counts
  // held never outgrow the payloads read, whatever number a damaged chunk starts from.
  std::vector<SiteCounts>& sites = open_.sites[thread];
  if (first != sites.size())
    return "a TALLIES chunk of thread " + std::to_string(thread) + " starts at site " + std::to_string(first) +
           ", not where the thread's counts reached (" + std::to_string(sites.size()) + ")";
  sites.resize(first + count);
  for (uint64_t i = 0; i < count; ++i) {
    SiteCounts& s = sites[first + i];
    if (!get_varint(&p, end, &s.allocations) || !get_varint(&p, end, &s.temporaries) ||
        !get_varint(&p, end, &s.live) || !get_varint(&p, end, &s.live_at_peak))
      return "a TALLIES chunk of thread " + std::to_string(thread) + " ends inside site " +
             std::to_string(first + i);
  }
  return "";
}

std::string AggregateReader::close_set(const uint8_t* begin, const uint8_t* end) {
  const uint8_t* p = begin;
  AggregateCounts& set = open_;
  uint64_t types = 0;
  if (open_damaged_) {
    open_ = AggregateCounts();
    open_damaged_ = false;
    return "a set of aggregated counts holds a damaged TALLIES chunk; it is left out";
  }
  if (!get_varint(&p, end, &set.time) || !get_varint(&p, end, &set.live_bytes) ||
      !get_varint(&p, end, &set.live_blocks) || !get_varint(&p, end, &set.peak_bytes) ||
      !get_varint(&p, end, &set.peak_time) || !get_varint(&p, end, &set.peak_blocks) ||
      !get_varint(&p, end, &types) || types > static_cast<uint64_t>(end - p)) {
    open_ = AggregateCounts();
    return "an AGGREGATE chunk is damaged; its counts are left out";
  }
  set.types.resize(types);
  for (TypePeak& type : set.types) {
    if (!get_varint(&p, end, &type.tag) || !get_varint(&p, end, &type.peak_bytes) ||
        !get_varint(&p, end, &type.peak_time)) {
      open_ = AggregateCounts();
      return "an AGGREGATE chunk ends inside its types; its counts are left out";
    }
  }
  set.present = true;
  last_ = std::move(open_);
  open_ = AggregateCounts();
  return "";
}

}  // namespace format
}  // namespace heaptype
