// profile_bindings.cpp: ProfileFile (what a profile says of itself) and
// ProfileBuilder (synthetic profiles for tests).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "bindings.hpp"
#include "format/event_decoder.hpp"
#include "format/profile_builder.hpp"
#include "format/profile_file.hpp"

namespace py = pybind11;
using heaptype::format::ProfileBuilder;
using heaptype::format::ProfileFile;

namespace heaptype {
namespace bindings {
namespace {

py::object end_summary(const ProfileFile& file) {
  const auto& e = file.end();
  if (!e.present) return py::none();
  py::dict d;
  d["allocations"] = e.allocations;
  d["frees"] = e.frees;
  d["untracked_frees"] = e.untracked_frees;
  d["buffer_bytes"] = e.buffer_bytes;
  d["registry_bytes"] = e.registry_bytes;
  // buffer_bytes by use (version 3 on), in the END chunk's order (format::EndUse).
  static const char* const kUses[] = {"event buffers", "call paths", "sites", "call-site types",
                                      "profile writer", "other", "block starts"};
  static_assert(sizeof kUses / sizeof *kUses == static_cast<size_t>(heaptype::format::EndUse::kCount),
                "a name per EndUse");
  py::dict uses;
  for (size_t i = 0; i < e.buffer_uses.size(); ++i) uses[kUses[i]] = e.buffer_uses[i];
  d["buffer_uses"] = uses;
  static const char* const kCauses[] = {"exit", "exec", "dump"};  // format::EndCause
  d["cause"] = kCauses[static_cast<unsigned>(e.cause)];
  return std::move(d);
}

py::list threads_list(const ProfileFile& file) {
  py::list out;
  for (const auto& entry : file.threads()) {
    py::dict d;
    d["number"] = entry.second.number;
    d["os_tid"] = entry.second.os_tid;
    d["name"] = name_text(entry.second.name);
    out.append(d);
  }
  return out;
}

py::list argv_list(const ProfileFile& file) {
  py::list out;
  for (const std::string& arg : file.argv()) out.append(path_text(arg));
  return out;
}

py::list text_list(const std::vector<std::string>& items) {
  py::list out;
  for (const std::string& item : items) out.append(name_text(item));
  return out;
}

py::tuple thread_events(const ProfileFile& file, uint32_t thread) {
  format::ThreadEvents events(file, thread);
  py::list out;
  format::Event e;
  static const char* const kKinds[] = {"alloc", "free", "move", "stack"};
  while (events.next(&e))
    out.append(py::make_tuple(kKinds[e.kind], e.thread, e.site, e.new_site, e.time, e.temporary, e.address));
  return py::make_tuple(out, name_text(events.error()));
}

const char* mode_name(const ProfileFile& f) {
  switch (f.mode()) {
    case heaptype::format::RuntimeMode::kLinked:
      return "linked";
    case heaptype::format::RuntimeMode::kPreloaded:
      return "preloaded";
    case heaptype::format::RuntimeMode::kAttached:
      return "attached";
  }
  return "unknown";
}

}  // namespace

void bind_profile_file(py::module_& m) {
  py::class_<ProfileFile, std::shared_ptr<ProfileFile>>(m, "ProfileFile",
                                                        "A profile file: its header, process data and chunk index.")
      .def(py::init([](const py::object& path_object) {
             std::string path = path_bytes(path_object);
             py::gil_scoped_release release;
             return std::make_shared<ProfileFile>(path);
           }),
           py::arg("path"))
      .def_property_readonly("path", [](const ProfileFile& f) { return path_text(f.path()); })
      .def_property_readonly("pid", [](const ProfileFile& f) { return f.header().pid; })
      .def_property_readonly("start_unix_ns", [](const ProfileFile& f) { return f.header().start_unix_ns; })
      .def_property_readonly("clock_tick_ns", [](const ProfileFile& f) { return f.header().clock_tick_ns; })
      .def_property_readonly("version", [](const ProfileFile& f) { return f.header().version; })
      .def_property_readonly("has_addresses", &ProfileFile::has_addresses,
                             "True when the records carry block addresses (HEAPTYPE_ADDRESSES=1).")
      .def_property_readonly("mode", &mode_name,
                             "How the runtime came into the process: 'linked', 'preloaded' or 'attached'.")
      .def_property_readonly("snapshots", &ProfileFile::snapshots,
                             "Times (clock ticks) of the snapshot marks the program was asked for.")
      .def_property_readonly("executable", [](const ProfileFile& f) { return path_text(f.executable()); })
      .def_property_readonly("argv", &argv_list)
      .def_property_readonly("modules", [](const ProfileFile& f) { return path_text(f.modules()); },
                             "The process's module map: lines 'start end offset perms path'.")
      .def_property_readonly("threads", &threads_list, "[{number, os_tid, name}] of the threads that allocated.")
      .def_property_readonly("end", &end_summary,
                             "The runtime's own counts at exit, or None when the profile was not finished.")
      .def_property_readonly("file_size", &ProfileFile::file_size, "Bytes on disk (compressed or not).")
      .def_property_readonly("compressed", &ProfileFile::compressed, "The chunks are a zstd stream (from the start, or after a ZSTD_FOLLOWS chunk).")
      .def_property_readonly("aggregated", &ProfileFile::aggregated,
                             "Counts per site instead of events (HEAPTYPE_MODE=aggregate).")
      .def_property_readonly("aggregate_complete", [](const ProfileFile& f) { return f.aggregate().present; },
                             "An aggregated profile holds a whole set of counts.")
      .def_property_readonly("event_bytes", &ProfileFile::event_bytes)
      .def_property_readonly("dropped_bytes", &ProfileFile::dropped_bytes,
                             "Bytes after the last whole chunk (a file cut short).")
      .def_property_readonly("damage", [](const ProfileFile& f) { return name_text(f.damage()); },
                             "Why bytes were dropped, or ''.")
      .def_property_readonly("warnings", [](const ProfileFile& f) { return text_list(f.warnings()); })
      .def("events", &thread_events, py::arg("thread"),
           "One thread's records as decoded, for inspection: (kind, thread, site, new_site, time, "
           "temporary, address) each, kind 'alloc', 'free' or 'move'; then the decoding error or ''.");
}

void bind_builder(py::module_& m) {
  py::class_<ProfileBuilder>(m, "ProfileBuilder",
                             "Writes a profile record by record (see src/format/profile_format.hpp), for tests.")
      .def(py::init<uint64_t, bool, uint64_t>(), py::arg("clock_tick_ns") = 1000, py::arg("addresses") = false,
           py::arg("pid") = 1)
      .def("program", &ProfileBuilder::program, py::arg("executable"), py::arg("argv") = std::vector<std::string>{})
      .def("modules", &ProfileBuilder::modules, py::arg("text"))
      .def("thread", &ProfileBuilder::thread, py::arg("thread"), py::arg("os_tid") = 0, py::arg("name") = "")
      .def("site", &ProfileBuilder::site, py::arg("thread"), py::arg("size"), py::arg("count") = 0,
           py::arg("type_tag") = 0, py::arg("call_site") = 0, py::arg("node") = 0)
      .def("derived_site", &ProfileBuilder::derived_site, py::arg("thread"), py::arg("base_thread"),
           py::arg("base_site"), py::arg("type_tag"), py::arg("count") = 1)
      .def("node", &ProfileBuilder::node, py::arg("thread"), py::arg("parent"), py::arg("function") = 0,
           py::arg("call_site") = 0)
      .def("alloc", &ProfileBuilder::alloc, py::arg("thread"), py::arg("time"), py::arg("site"),
           py::arg("address") = 0)
      .def("free", &ProfileBuilder::free, py::arg("thread"), py::arg("time"), py::arg("site"), py::arg("address") = 0)
      .def("free_last", &ProfileBuilder::free_last, py::arg("thread"), py::arg("time"))
      .def("free_remote", &ProfileBuilder::free_remote, py::arg("thread"), py::arg("time"), py::arg("owner_thread"),
           py::arg("site"), py::arg("address") = 0)
      .def("move", &ProfileBuilder::move, py::arg("thread"), py::arg("time"), py::arg("owner_thread"),
           py::arg("site"), py::arg("new_site"), py::arg("address") = 0)
      .def("stack", &ProfileBuilder::stack, py::arg("thread"), py::arg("time"), py::arg("bytes"))
      .def("finding", &ProfileBuilder::finding, py::arg("thread"), py::arg("time"), py::arg("kind"),
           py::arg("owner_thread"), py::arg("site"), py::arg("a"), py::arg("b"), py::arg("call_site") = 0,
           py::arg("node") = 0)
      .def("flush", &ProfileBuilder::flush, py::arg("thread"))
      .def("raw_chunk", [](ProfileBuilder& b, uint8_t kind, uint32_t thread,
                           py::bytes payload) { b.raw_chunk(kind, thread, payload); },
           py::arg("kind"), py::arg("thread"), py::arg("payload"))
      .def("end", &ProfileBuilder::end, py::arg("allocations"), py::arg("frees"), py::arg("untracked_frees") = 0,
           py::arg("buffer_bytes") = 0, py::arg("registry_bytes") = 0)
      .def("finish", [](ProfileBuilder& b) { return py::bytes(b.finish()); }, "The file's bytes.");
}

}  // namespace bindings
}  // namespace heaptype
