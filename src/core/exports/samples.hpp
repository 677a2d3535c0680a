// samples.hpp: the allocations of an analysis as samples, one per (calling
// context, type): what pprof's formats want.
#ifndef HEAPTYPE_CORE_EXPORTS_SAMPLES_HPP
#define HEAPTYPE_CORE_EXPORTS_SAMPLES_HPP

#include <vector>

#include "../analysis.hpp"

namespace heaptype {
namespace core {

struct Sample {
  uint32_t context;
  uint32_t type_group;
  Figures figures;  // summed over the context's placements of that type
};

// Samples of the placements the analysis's filters keep, in a stable order.
std::vector<Sample> collect_samples(const Analysis& analysis);

// Return addresses of a path, leaf first, as gperftools writes them: a pc inside
// the call for the leaf, pc + 1 for the others (pprof subtracts one from every
// address but the first). Frames sharing a pc (inlined into one function) give one.
std::vector<uint64_t> return_addresses(const std::vector<const PathFrame*>& frames);

}  // namespace core
}  // namespace heaptype

#endif
