#include "budget_rows.hpp"

#include <algorithm>
#include <unordered_set>

#include "patterns.hpp"

namespace heaptype {
namespace core {

bool BudgetRow::over(int field, uint64_t limit) const {
  switch (field) {
    case kPeak:
      return peak > limit;
    case kBytes:
      return bytes > limit;
    case kAllocations:
      return allocations > limit;
    case kLeaked:
      return leaked > 0 && static_cast<uint64_t>(leaked) > limit;
  }
  return false;
}

AnalysisOptions BudgetRows::options() {
  AnalysisOptions options;
  options.infer = false;  // budgets judge the types the program named, as heaptype.budget.measure does
  options.histograms = false;
  return options;
}

BudgetRows::BudgetRows(const format::ProfileFile& file, CodeNames* names, BudgetRowsRequest request)
    : analysis_(file, names, options()) {
  analysis_.run();
  const std::vector<TypeGroup>& types = analysis_.types();
  const StringTable& strings = analysis_.strings();
  std::vector<std::string> globs;
  std::unordered_set<std::string> exact(request.names.begin(), request.names.end());
  for (const std::string& p : request.patterns) {
    if (is_glob(p))
      globs.push_back(p);
    else
      exact.insert(p);
  }
  auto row_of = [](uint32_t id, const TypeGroup& g) {
    const Figures& f = g.figures;
    return BudgetRow{id, f.peak_bytes, f.bytes, f.allocations, f.live_bytes};
  };
  // The top rows by peak, ties by name (byte order: code point order for UTF-8, as
  // Python sorts the names): a bounded heap of candidates.
  auto before = [&](uint32_t a, uint32_t b) {
    const Figures &fa = types[a].figures, &fb = types[b].figures;
    if (fa.peak_bytes != fb.peak_bytes) return fa.peak_bytes > fb.peak_bytes;
    return strings.get(types[a].name) < strings.get(types[b].name);
  };
  std::vector<uint32_t> top;
  std::vector<bool> chosen(types.size(), false);
  int untyped = -1;
  for (uint32_t id = 0; id < types.size(); ++id) {
    const TypeGroup& g = types[id];
    if (!counts(g)) continue;
    if (g.name == 0) {
      untyped = static_cast<int>(id);
      continue;
    }
    ++typed_rows_;
    BudgetRow row = row_of(id, g);
    bool wanted = false;
    for (const auto& limit : request.default_limits) {
      if (row.over(limit.first, limit.second)) {
        wanted = true;
        break;
      }
    }
    if (!wanted && (!exact.empty() || !globs.empty())) {
      const std::string& name = strings.get(g.name);
      wanted = exact.count(name) > 0 || any_of(globs.begin(), globs.end(),
                                               [&](const std::string& p) { return glob_match(p, name); });
    }
    if (wanted) {
      chosen[id] = true;
      rows_.push_back(row);
      continue;
    }
    if (request.top == 0) continue;
    if (top.size() < request.top) {
      top.push_back(id);
      std::push_heap(top.begin(), top.end(), before);  // the front: the last of the top so far
    } else if (before(id, top.front())) {
      std::pop_heap(top.begin(), top.end(), before);
      top.back() = id;
      std::push_heap(top.begin(), top.end(), before);
    }
  }
  // Rows handed over for another reason may rank among the top too: the engine picks
  // its top rows from all it gets, so the top `top` of the rest complete them.
  std::sort(top.begin(), top.end());
  for (uint32_t id : top) rows_.push_back(row_of(id, types[id]));
  std::sort(rows_.begin(), rows_.end(), [](const BudgetRow& a, const BudgetRow& b) { return a.group < b.group; });
  if (untyped >= 0) {
    rows_.push_back(row_of(static_cast<uint32_t>(untyped), types[untyped]));
    has_untyped_ = true;
  }
}

const std::string& BudgetRows::name(const BudgetRow& row) const {
  return analysis_.strings().get(analysis_.types()[row.group].name);
}

std::vector<std::string> BudgetRows::typed_names(std::string_view containing) const {
  std::vector<std::string> out;
  if (containing.empty()) out.reserve(typed_rows_);
  for (const TypeGroup& g : analysis_.types()) {
    if (g.name == 0 || !counts(g)) continue;
    const std::string& name = analysis_.strings().get(g.name);
    if (name.find(containing) != std::string::npos) out.push_back(name);
  }
  return out;
}

}  // namespace core
}  // namespace heaptype
