// budget_bindings.cpp: the budget check's pass over a profile (core/budget_rows.hpp):
// the few rows a check uses as tuples, not a Python object per type.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "bindings.hpp"
#include "core/budget_rows.hpp"

namespace py = pybind11;

namespace heaptype {
namespace bindings {
namespace {

// The rows with what they were read from, which the analysis refers to.
struct BudgetRowsOut {
  std::shared_ptr<format::ProfileFile> file;
  std::shared_ptr<core::CodeNames> names;
  std::unique_ptr<core::BudgetRows> rows;
};

py::tuple figures_tuple(const core::BudgetRow& r) { return py::make_tuple(r.peak, r.bytes, r.allocations, r.leaked); }

}  // namespace

void bind_budget_rows(py::module_& m) {
  py::class_<BudgetRowsOut, std::shared_ptr<BudgetRowsOut>>(
      m, "BudgetRows",
      "What a budget check needs of a profile, from one pass (see core/budget_rows.hpp): the rows named "
      "patterns cover, the rows over the default limits, the top rows by peak, the rows asked for by name, "
      "the untyped row and the totals; figures as (peak, bytes, allocations, leaked).")
      .def(py::init([](std::shared_ptr<format::ProfileFile> file, std::shared_ptr<core::CodeNames> names,
                       std::vector<std::string> patterns, std::vector<std::string> wanted,
                       std::vector<std::pair<int, uint64_t>> default_limits, size_t top) {
             core::BudgetRowsRequest request;
             request.patterns = std::move(patterns);
             request.names = std::move(wanted);
             request.default_limits = std::move(default_limits);
             request.top = top;
             auto out = std::make_shared<BudgetRowsOut>();
             out->file = std::move(file);
             out->names = std::move(names);
             {
               py::gil_scoped_release release;
               out->rows.reset(new core::BudgetRows(*out->file, out->names.get(), std::move(request)));
             }
             return out;
           }),
           py::arg("file"), py::arg("names"), py::kw_only(), py::arg("patterns") = std::vector<std::string>{},
           py::arg("wanted") = std::vector<std::string>{},
           py::arg("default_limits") = std::vector<std::pair<int, uint64_t>>{}, py::arg("top") = 5,
           "default_limits: (field index in peak, bytes, allocations, leaked; value) pairs.")
      .def("rows",
           [](const BudgetRowsOut& o) {
             // typed rows by name, then the untyped row under the key None
             py::list out;
             const auto& rows = o.rows->rows();
             for (size_t i = 0; i < rows.size(); ++i) {
               bool untyped = o.rows->has_untyped() && i + 1 == rows.size();
               py::object name = untyped ? py::object(py::none()) : py::object(name_text(o.rows->name(rows[i])));
               out.append(py::make_tuple(name, figures_tuple(rows[i])));
             }
             return out;
           },
           "[(type name, or None for the untyped row; (peak, bytes, allocations, leaked))]")
      .def("snapshot_peaks",
           [](const BudgetRowsOut& o) {
             py::list out;
             const auto& rows = o.rows->rows();
             for (size_t i = 0; i < rows.size(); ++i) {
               if (!o.rows->snapshot_peak(rows[i])) continue;
               bool untyped = o.rows->has_untyped() && i + 1 == rows.size();
               out.append(untyped ? py::object(py::none()) : py::object(name_text(o.rows->name(rows[i]))));
             }
             return out;
           },
           "Aggregated profiles: the rows handed over whose peak is their share of the heap's peak, not "
           "their own (type name, or None for the untyped row).")
      .def_property_readonly("totals",
                             [](const BudgetRowsOut& o) {
                               const core::Totals& t = o.rows->totals();
                               return py::make_tuple(t.peak_bytes, t.bytes, t.allocations, t.live_bytes);
                             })
      .def_property_readonly("typed_rows", [](const BudgetRowsOut& o) { return o.rows->typed_rows(); },
                             "How many typed rows the profile has (all of them, not only those handed over).")
      .def("typed_names",
           [](const BudgetRowsOut& o, const std::string& containing) {
             py::list out;
             for (const std::string& name : o.rows->typed_names(containing)) out.append(name_text(name));
             return out;
           },
           py::arg("containing") = "",
           "The names of every typed row (that contain `containing`, when given), in the order of the pass.")
      .def_property_readonly("warnings", [](const BudgetRowsOut& o) { return o.rows->warnings(); })
      .def_property_readonly("has_call_paths", [](const BudgetRowsOut& o) { return o.rows->has_call_paths(); });
}

}  // namespace bindings
}  // namespace heaptype
