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
  // A thread's chunks in a set go up its site numbers (aggregate.cpp): a site counted
  // twice in one set is damage.
  uint64_t& reached = open_reached_[thread];
  if (first < reached)
    return "a TALLIES chunk of thread " + std::to_string(thread) + " starts at site " + std::to_string(first) +
           ", below where the thread's counts reached (" + std::to_string(reached) + ")";
  reached = first + count;
  for (uint64_t i = 0; i < count; ++i) {
    CountedSite counted{thread, static_cast<uint32_t>(first + i), {}};
    SiteCounts& s = counted.counts;
    if (!get_varint(&p, end, &s.allocations) || !get_varint(&p, end, &s.temporaries) ||
        !get_varint(&p, end, &s.live) || !get_varint(&p, end, &s.live_at_peak))
      return "a TALLIES chunk of thread " + std::to_string(thread) + " ends inside site " +
             std::to_string(first + i);
    if (s.allocations || s.live) open_.sites.push_back(counted);
  }
  return "";
}

namespace {

// An entry of a SURVIVORS or RETIRED chunk: its (thread, site) as distances from the
// entry before (`previous`: the chunk's first from thread 0, site 0), allocations,
// temporaries, the blocks live now (SURVIVORS only: `with_live`) and at the peak.
bool get_entry(const uint8_t** p, const uint8_t* end, bool with_live, CountedSite* previous, CountedSite* counted) {
  uint64_t thread_distance = 0, site_distance = 0;
  if (!get_varint(p, end, &thread_distance) || !get_varint(p, end, &site_distance)) return false;
  int64_t thread = moved_forward(previous->thread, thread_distance);
  int64_t site = moved_forward(previous->site, site_distance);
  if (thread < 0 || thread > UINT32_MAX || site < 0 || site > UINT32_MAX) return false;
  counted->thread = previous->thread = static_cast<uint32_t>(thread);
  counted->site = previous->site = static_cast<uint32_t>(site);
  SiteCounts& s = counted->counts;
  return get_varint(p, end, &s.allocations) && get_varint(p, end, &s.temporaries) &&
         (!with_live || get_varint(p, end, &s.live)) && get_varint(p, end, &s.live_at_peak);
}

}  // namespace

std::string AggregateReader::add_survivors(const uint8_t* begin, const uint8_t* end) {
  std::string problem = read_survivors(begin, end);
  if (!problem.empty()) open_damaged_ = true;
  return problem;
}

std::string AggregateReader::read_survivors(const uint8_t* begin, const uint8_t* end) {
  CountedSite previous;
  for (const uint8_t* p = begin; p < end;) {
    CountedSite counted;
    if (!get_entry(&p, end, true, &previous, &counted)) return "a SURVIVORS chunk is damaged";
    open_.sites.push_back(counted);
  }
  return "";
}

std::string AggregateReader::add_retired(const uint8_t* begin, const uint8_t* end) {
  const uint8_t* p = begin;
  uint64_t peak_bytes = 0;
  std::vector<Retired> chunk;
  if (!get_varint(&p, end, &peak_bytes)) return "a RETIRED chunk is damaged; its counts are left out";
  CountedSite previous;
  while (p < end) {
    Retired retired{{}, peak_bytes};
    if (!get_entry(&p, end, false, &previous, &retired.site))
      return "a RETIRED chunk is damaged; its counts are left out";
    chunk.push_back(retired);
  }
  retired_.insert(retired_.end(), chunk.begin(), chunk.end());
  return "";
}

void AggregateReader::finish() {
  if (!last_.present) return;
  // Millions in a test suite's profile: grown once, not doubled on the way.
  last_.sites.reserve(last_.sites.size() + retired_before_last_);
  for (size_t i = 0; i < retired_before_last_; ++i) {
    CountedSite counted = retired_[i].site;
    if (retired_[i].peak_bytes != last_.peak_bytes) counted.counts.live_at_peak = 0;  // a later peak
    last_.sites.push_back(counted);
  }
  retired_.clear();
  retired_.shrink_to_fit();
  retired_before_last_ = 0;
}

std::string AggregateReader::close_set(const uint8_t* begin, const uint8_t* end) {
  const uint8_t* p = begin;
  AggregateCounts& set = open_;
  uint64_t types = 0;
  open_reached_.clear();
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
  retired_before_last_ = retired_.size();
  return "";
}

}  // namespace format
}  // namespace heaptype
