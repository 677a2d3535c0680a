// samples.hpp: the allocations of an analysis as samples, one per (calling
// context, type): what pprof's formats want.
#ifndef HEAPTYPE_CORE_EXPORTS_SAMPLES_HPP
#define HEAPTYPE_CORE_EXPORTS_SAMPLES_HPP

#include <string>
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

// The frames of a path (root first) by code location, leaf first: frames that share a
// pc (a function and what is inlined into it at that call) form one group, innermost
// first, as pprof's locations and heaptrack's instruction pointers hold them.
std::vector<std::vector<const PathFrame*>> frames_by_pc(const std::vector<const PathFrame*>& frames);

// A key naming one such group: its pc and its frames' names, files and lines.
std::string location_key(const std::vector<const PathFrame*>& group);

}  // namespace core
}  // namespace heaptype

#endif
