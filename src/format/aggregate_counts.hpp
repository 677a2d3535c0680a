// aggregate_counts.hpp: the counts of an aggregated profile (format::kFlagAggregated), as
// the reader gathers them from TALLIES and AGGREGATE chunks (profile_format.hpp).
//
// A profile may hold several sets (one per snapshot, the last at exit); only a set its
// AGGREGATE chunk closed counts, and the last of those is the profile's: a file cut
// short keeps the set before the cut. RETIRED chunks hold final counts of sites that
// are in no later set: those read before the last whole set join it (finish()).
#ifndef HEAPTYPE_FORMAT_AGGREGATE_COUNTS_HPP
#define HEAPTYPE_FORMAT_AGGREGATE_COUNTS_HPP

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace heaptype {
namespace format {

// One (thread, site)'s blocks.
struct SiteCounts {
  uint64_t allocations = 0;
  uint64_t temporaries = 0;
  uint64_t live = 0;          // blocks live at the set's time
  uint64_t live_at_peak = 0;  // ... at the heap's peak
};

// A type's own peak: the most bytes of it live at once (type tags: see format::Site).
struct TypePeak {
  uint64_t tag = 0;
  uint64_t peak_bytes = 0;
  uint64_t peak_time = 0;
};

struct CountedSite {
  uint32_t thread = 0;
  uint32_t site = 0;
  SiteCounts counts;
};

struct AggregateCounts {
  bool present = false;       // a whole set was read
  uint64_t time = 0;          // when it was taken (clock ticks)
  uint64_t live_bytes = 0;
  uint64_t live_blocks = 0;
  uint64_t peak_bytes = 0;    // the whole heap's peak, exact
  uint64_t peak_time = 0;
  uint64_t peak_blocks = 0;   // the most blocks live at once
  std::vector<CountedSite> sites;  // each (thread, site) once
  std::vector<TypePeak> types;
};

// Reads sets of counts chunk by chunk.
class AggregateReader {
 public:
  // A TALLIES chunk of `thread`; "" or what is wrong with it.
  std::string add_tallies(uint32_t thread, const uint8_t* begin, const uint8_t* end);
  // A SURVIVORS chunk (part of the open set); "" or what is wrong with it.
  std::string add_survivors(const uint8_t* begin, const uint8_t* end);
  // A RETIRED chunk; "" or what is wrong with it (a damaged one is left out whole).
  std::string add_retired(const uint8_t* begin, const uint8_t* end);
  // An AGGREGATE chunk closes the set read since the last one; "" or what is wrong.
  std::string close_set(const uint8_t* begin, const uint8_t* end);
  // After the last chunk: the retired counts read before the last whole set join it.
  void finish();
  // The last whole set (present == false: none).
  const AggregateCounts& counts() const { return last_; }

 private:
  // Final counts of a site; `live_at_peak` holds if the profile's peak is `peak_bytes`.
  struct Retired {
    CountedSite site;
    uint64_t peak_bytes;
  };

  std::string read_tallies(uint32_t thread, const uint8_t* begin, const uint8_t* end);
  std::string read_survivors(const uint8_t* begin, const uint8_t* end);

  AggregateCounts open_;
  std::map<uint32_t, uint64_t> open_reached_;  // by thread: where its TALLIES in the open set reached
  bool open_damaged_ = false;
  AggregateCounts last_;
  std::vector<Retired> retired_;
  size_t retired_before_last_ = 0;  // how many of them were read before the last whole set
};

}  // namespace format
}  // namespace heaptype

#endif
