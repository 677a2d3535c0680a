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
  into->live_bytes = Figures::plus(into->live_bytes, f.live_bytes);
  into->live_blocks = Figures::plus(into->live_blocks, f.live_blocks);
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

std::vector<std::vector<const PathFrame*>> frames_by_pc(const std::vector<const PathFrame*>& frames) {
  std::vector<std::vector<const PathFrame*>> groups;
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    const PathFrame* f = *it;
    if (!groups.empty() && f->pc && groups.back()[0]->pc == f->pc && f->call) {
      groups.back().push_back(f);
    } else {
      groups.push_back({f});
    }
  }
  return groups;
}

std::string location_key(const std::vector<const PathFrame*>& group) {
  std::string key;
  uint64_t pc = group[0]->pc;
  key.append(reinterpret_cast<const char*>(&pc), sizeof pc);
  for (const PathFrame* f : group) {
    uint32_t parts[3] = {f->name, f->file, f->line};
    key.append(reinterpret_cast<const char*>(parts), sizeof parts);
  }
  return key;
}

}  // namespace core
}  // namespace heaptype
