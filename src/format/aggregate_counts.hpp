// aggregate_counts.hpp: the counts of an aggregated profile (format::kFlagAggregated), as
// the reader gathers them from TALLIES and AGGREGATE chunks (profile_format.hpp).
//
// A profile may hold several sets (one per snapshot, the last at exit); only a set its
// AGGREGATE chunk closed counts, and the last of those is the profile's: a file cut
// short keeps the set before the cut.
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

struct AggregateCounts {
  bool present = false;       // a whole set was read
  uint64_t time = 0;          // when it was taken (clock ticks)
  uint64_t live_bytes = 0;
  uint64_t live_blocks = 0;
  uint64_t peak_bytes = 0;    // the whole heap's peak, exact
  uint64_t peak_time = 0;
  uint64_t peak_blocks = 0;   // the most blocks live at once
  std::map<uint32_t, std::vector<SiteCounts>> sites;  // by thread, by site number
  std::vector<TypePeak> types;
};

// Reads sets of counts chunk by chunk.
class AggregateReader {
 public:
  // A TALLIES chunk of `thread`; "" or what is wrong with it.
  std::string add_tallies(uint32_t thread, const uint8_t* begin, const uint8_t* end);
  // An AGGREGATE chunk closes the set read since the last one; "" or what is wrong.
  std::string close_set(const uint8_t* begin, const uint8_t* end);
  // The last whole set (present == false: none).
  const AggregateCounts& counts() const { return last_; }

 private:
  std::string read_tallies(uint32_t thread, const uint8_t* begin, const uint8_t* end);

  AggregateCounts open_;
  bool open_damaged_ = false;
  AggregateCounts last_;
};

}  // namespace format
}  // namespace heaptype

#endif
