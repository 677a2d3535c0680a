// budget_rows.hpp: what a budget check needs of one profile, from one pass.
//
// A GoogleTest binary's profile holds a thousand types in every test (a
// TestFactoryImpl<T> per registered test), and a suite checks a thousand such
// profiles. The budget engine (python/heaptype/budget) judges every typed row, but
// the rows only the [defaults] limits cover all share one set of limits: those
// within them change nothing in the verdict and are never shown or stored. So the
// pass hands over only the rows the check can use:
//
//   - every row a named pattern of the budget covers (exact names and globs);
//   - every row over one of the [defaults] limits;
//   - the `top` typed rows by peak (ties by name), which baselines and verdict
//     tables keep;
//   - the rows named in `names` (the test's rows in a baseline);
//   - the untyped row and the totals;
//
// and the names of all typed rows only when asked (a budget pattern that matches
// nothing: its "close names" hint). Figures are exact: the same pass as
// Analysis(infer=false).
#ifndef HEAPTYPE_CORE_BUDGET_ROWS_HPP
#define HEAPTYPE_CORE_BUDGET_ROWS_HPP

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../format/profile_file.hpp"
#include "analysis.hpp"
#include "code_names.hpp"

namespace heaptype {
namespace core {

// The four figures a budget limits, in the engine's order (values.FIELDS).
enum BudgetField { kPeak = 0, kBytes = 1, kAllocations = 2, kLeaked = 3 };

struct BudgetRowsRequest {
  std::vector<std::string> patterns;  // named type patterns (the glob dialect of patterns.hpp)
  std::vector<std::string> names;     // rows wanted by name when the profile has them
  // The limits of a typed row no pattern names, as (field, value): a row over any
  // of them is handed over.
  std::vector<std::pair<int, uint64_t>> default_limits;
  size_t top = 5;
};

struct BudgetRow {
  uint32_t group;  // index into Analysis::types()
  uint64_t peak, bytes, allocations;
  int64_t leaked;  // live bytes at the end
  bool over(int field, uint64_t limit) const;
};

class BudgetRows {
 public:
  BudgetRows(const format::ProfileFile& file, CodeNames* names, BudgetRowsRequest request);

  // Typed rows first, in the order of the analysis' groups; then the untyped row.
  const std::vector<BudgetRow>& rows() const { return rows_; }
  bool has_untyped() const { return has_untyped_; }
  // Aggregated profiles: the row's peak is its share of the heap's peak, not its own
  // (see TypeGroup::peak_at_heap_peak): a budget cannot judge it.
  bool snapshot_peak(const BudgetRow& row) const { return analysis_.types()[row.group].peak_at_heap_peak; }
  const std::string& name(const BudgetRow& row) const;
  const Totals& totals() const { return analysis_.totals(); }
  size_t typed_rows() const { return typed_rows_; }
  // The names of every typed row with allocations or live blocks (that contain
  // `containing`, when given: a search for one type's holders makes no list of all).
  std::vector<std::string> typed_names(std::string_view containing = {}) const;
  const std::vector<std::string>& warnings() const { return analysis_.warnings(); }
  bool has_call_paths() const { return analysis_.has_call_paths(); }

 private:
  static AnalysisOptions options();
  bool counts(const TypeGroup& g) const { return g.figures.allocations || g.figures.live_blocks; }

  Analysis analysis_;
  std::vector<BudgetRow> rows_;
  bool has_untyped_ = false;
  size_t typed_rows_ = 0;
};

}  // namespace core
}  // namespace heaptype

#endif
