#include "samples.hpp"

#include <algorithm>
#include <map>

namespace heaptype {
namespace core {

namespace {

void add(Figures* into, const Figures& f) {
  into->allocations += f.allocations;
  into->objects += f.objects;
  into->bytes += f.bytes;
  into->live_bytes += f.live_bytes;
  into->live_blocks += f.live_blocks;
  into->peak_bytes += f.peak_bytes;
  into->temporary_allocations += f.temporary_allocations;
}

}  // namespace

std::vector<Sample> collect_samples(const Analysis& analysis) {
  std::map<std::pair<uint32_t, uint32_t>, Figures> merged;
  analysis.for_each_placement([&](const Placement& p) {
    if (!p.selected || !p.figures.allocations) return;
    add(&merged[{p.context, p.type_group}], p.figures);
  });
  std::vector<Sample> out;
  out.reserve(merged.size());
  for (const auto& entry : merged) out.push_back(Sample{entry.first.first, entry.first.second, entry.second});
  return out;
}

std::vector<uint64_t> return_addresses(const std::vector<const PathFrame*>& frames) {
  std::vector<uint64_t> out;
  uint64_t last_pc = 0;
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    uint64_t pc = (*it)->pc;
    if (!pc || pc == last_pc) continue;
    last_pc = pc;
    out.push_back(out.empty() ? pc : pc + 1);
  }
  return out;
}

}  // namespace core
}  // namespace heaptype
