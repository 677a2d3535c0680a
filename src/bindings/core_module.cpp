// core_module.cpp: the thin pybind11 layer over src/format and src/core.
// Everything whose cost grows with the number of events stays in C++; this file
// only converts results to Python objects.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "core/aggregate.hpp"
#include "core/demangle.hpp"
#include "format/profile_reader.hpp"
#include "symbolize_bindings.hpp"

namespace py = pybind11;
using heaptype::core::Aggregate;
using heaptype::format::ProfileFile;

namespace {

py::dict totals_dict(const heaptype::core::Totals& t) {
  py::dict d;
  d["allocations"] = t.allocations;
  d["frees"] = t.frees;
  d["bytes"] = t.bytes;
  d["live_bytes"] = t.live_bytes;
  d["live_blocks"] = t.live_blocks;
  d["peak_bytes"] = t.peak_bytes;
  d["peak_time_us"] = t.peak_time_us;
  d["peak_live_blocks"] = t.peak_live_blocks;
  d["duration_us"] = t.duration_us;
  d["unmatched_frees"] = t.unmatched_frees;
  return d;
}

py::list rows_list(const Aggregate& a) {
  py::list rows;
  for (const auto& s : a.rows) {
    py::dict d;
    d["type_tag"] = s.type_tag;
    d["allocations"] = s.allocations;
    d["objects"] = s.objects;
    d["bytes"] = s.bytes;
    d["live_bytes"] = s.live_bytes;
    d["live_blocks"] = s.live_blocks;
    d["peak_bytes"] = s.peak_bytes;
    d["peak_time_us"] = s.peak_time_us;
    rows.append(d);
  }
  return rows;
}

py::dict aggregate(ProfileFile& file, const std::unordered_map<uint64_t, uint32_t>& groups) {
  Aggregate a;
  {
    py::gil_scoped_release release;
    a = heaptype::core::aggregate_by_type(file, groups);
  }
  py::dict out;
  out["rows"] = rows_list(a);
  out["totals"] = totals_dict(a.totals);
  out["warnings"] = a.warnings;
  // Calling contexts: (thread, node, call site) each; per (context, row) figures;
  // each thread's tree as (parent, function, call site) with index 0 the root.
  py::list contexts;
  for (const auto& c : a.contexts) contexts.append(py::make_tuple(c.thread, c.node, c.call_site));
  out["contexts"] = contexts;
  py::list context_rows;
  for (const auto& s : a.context_rows)
    context_rows.append(py::make_tuple(s.context, s.row, s.allocations, s.objects, s.bytes, s.live_bytes,
                                       s.peak_bytes, s.live_blocks));
  out["context_rows"] = context_rows;
  py::dict nodes;
  for (const auto& entry : a.nodes) {
    py::list tree;
    for (const auto& n : entry.second) tree.append(py::make_tuple(n.parent, n.function, n.call_site));
    nodes[py::int_(entry.first)] = tree;
  }
  out["nodes"] = nodes;
  return out;
}

py::object end_summary(const ProfileFile& file) {
  const auto& e = file.end();
  if (!e.present) return py::none();
  py::dict d;
  d["allocations"] = e.allocations;
  d["frees"] = e.frees;
  d["untracked_frees"] = e.untracked_frees;
  d["buffer_bytes"] = e.buffer_bytes;
  d["registry_bytes"] = e.registry_bytes;
  return d;
}

py::list threads_list(const ProfileFile& file) {
  py::list out;
  for (const auto& entry : file.threads()) {
    py::dict d;
    d["number"] = entry.second.number;
    d["os_tid"] = entry.second.os_tid;
    d["name"] = entry.second.name;
    out.append(d);
  }
  return out;
}

py::list live_list(const ProfileFile& file) {
  py::list out;
  for (const auto& b : file.live_at_finish())
    out.append(py::make_tuple(b.thread, b.number));
  return out;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "HeapType analysis core: profile reading and aggregation in C++";
  py::register_exception<heaptype::format::ProfileError>(m, "ProfileError", PyExc_ValueError);
  bind_symbolize(m);

  m.def("demangle", &heaptype::core::demangle, py::arg("name"),
        "Demangle one C++ symbol name (returned unchanged if it is not one).");
  m.def("demangle_many",
        [](const std::vector<std::string>& names) {
          std::vector<std::string> out;
          out.reserve(names.size());
          for (const auto& n : names) out.push_back(heaptype::core::demangle(n));
          return out;
        },
        py::arg("names"));

  py::class_<ProfileFile, std::shared_ptr<ProfileFile>>(m, "ProfileFile")
      .def(py::init([](const std::string& path) {
             py::gil_scoped_release release;
             return std::make_shared<ProfileFile>(path);
           }),
           py::arg("path"))
      .def_property_readonly("path", &ProfileFile::path)
      .def_property_readonly("pid", [](const ProfileFile& f) { return f.header().pid; })
      .def_property_readonly("start_unix_ns", [](const ProfileFile& f) { return f.header().start_unix_ns; })
      .def_property_readonly("clock_tick_ns", [](const ProfileFile& f) { return f.header().clock_tick_ns; })
      .def_property_readonly("version", [](const ProfileFile& f) { return f.header().version; })
      .def_property_readonly("executable", &ProfileFile::executable)
      .def_property_readonly("argv", &ProfileFile::argv)
      .def_property_readonly("modules", &ProfileFile::modules)
      .def_property_readonly("threads", &threads_list)
      .def_property_readonly("end", &end_summary)
      .def_property_readonly("live_at_finish", &live_list)
      .def_property_readonly("file_size", &ProfileFile::file_size)
      .def_property_readonly("dropped_bytes", &ProfileFile::dropped_bytes)
      .def_property_readonly("damage", &ProfileFile::damage)
      .def_property_readonly("warnings", [](ProfileFile& f) { return f.warnings(); })
      .def("aggregate_by_type", &aggregate, py::arg("groups"),
           "Per-type sums; `groups` maps type tags to row numbers.");
}
