// names_bindings.cpp: code names for the analysis (tables for synthetic profiles,
// the symbolizer), demangling and the glob dialect.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "bindings.hpp"
#include "core/code_names.hpp"
#include "core/cxx_names.hpp"
#include "core/type_inference.hpp"
#include "core/demangle.hpp"
#include "core/patterns.hpp"

namespace py = pybind11;
using heaptype::core::CodeFrame;
using heaptype::core::CodeInfo;
using heaptype::core::CodeNames;
using heaptype::core::TableCodeNames;

namespace heaptype {
namespace bindings {
namespace {

using FrameTuple = std::tuple<std::string, std::string, uint32_t, bool, uint64_t>;

std::vector<CodeFrame> to_frames(const std::vector<FrameTuple>& frames) {
  std::vector<CodeFrame> out;
  for (const auto& f : frames)
    out.push_back(CodeFrame{std::get<0>(f), std::get<1>(f), std::get<2>(f), std::get<3>(f), std::get<4>(f)});
  return out;
}

CodeInfo make_info(uint64_t address, const std::string& function, uint64_t function_address,
                   const std::string& module, uint64_t module_offset, const std::vector<FrameTuple>& frames) {
  CodeInfo info;
  info.address = address;
  info.function = function;
  info.function_address = function_address;
  info.module = module;
  info.module_offset = module_offset;
  info.frames = to_frames(frames);
  return info;
}

}  // namespace

void bind_names(py::module_& m) {
  m.def("demangles_with_libiberty", &core::demangles_with_libiberty,
        "whether binutils' demangler (libiberty) names what the C++ runtime's cannot");
  m.def("demangle", &core::demangle, py::arg("name"),
        "Demangle one C++ symbol name (returned unchanged if it is not one).");
  m.def("demangle_many",
        [](const std::vector<std::string>& names) {
          std::vector<std::string> out;
          out.reserve(names.size());
          for (const auto& n : names) out.push_back(core::demangle(n));
          return out;
        },
        py::arg("names"));
  m.def("glob_match", &core::glob_match, py::arg("pattern"), py::arg("name"),
        "HeapType's glob: `*` any run of characters, `?` one, everything else literal (brackets too).");
  m.def("is_glob", &core::is_glob, py::arg("pattern"));

  m.def("strip_parameters", &core::strip_parameters, py::arg("function"),
        "'R ns::f<A>(P) const' -> 'ns::f<A>': a function's qualified name alone.");
  m.def("infer_type",
        [](const std::vector<FrameTuple>& frames, const std::string& function, const std::string& module) -> py::object {
          CodeInfo info = make_info(0, function, 0, module, 0, frames);
          core::InferredType found = core::infer_type(info);
          if (found.name.empty()) return py::none();
          return py::make_tuple(found.name, found.size);
        },
        py::arg("frames"), py::arg("function") = "", py::arg("module") = "",
        "The type an untyped allocation at a call site with these frames (innermost first, as "
        "(function, file, line, inlined, type_argument_size)) in `module` allocates: (name, sizeof or 0), "
        "or None. A row of a C or C++ runtime's own blocks ('glibc: stdio buffer') has sizeof 0.");

  py::class_<CodeNames, std::shared_ptr<CodeNames>>(m, "CodeNames",
                                                    "What the analysis knows of code addresses and type tags.");

  py::class_<TableCodeNames, CodeNames, std::shared_ptr<TableCodeNames>>(
      m, "TableCodeNames", "Code and type names given as tables (synthetic profiles).")
      .def(py::init<>())
      .def("add_function",
           [](TableCodeNames& t, uint64_t address, const std::string& name, const std::string& module,
              const std::vector<FrameTuple>& frames) {
             t.functions[address] = make_info(address, name, address, module, 0, frames);
           },
           py::arg("address"), py::arg("name"), py::arg("module") = "",
           py::arg("frames") = std::vector<FrameTuple>{})
      .def("add_call_site",
           [](TableCodeNames& t, uint64_t address, const std::string& function, uint64_t function_address,
              const std::string& module, const std::vector<FrameTuple>& frames) {
             t.call_sites[address] = make_info(address, function, function_address, module, 0, frames);
           },
           py::arg("address"), py::arg("function"), py::arg("function_address") = 0, py::arg("module") = "",
           py::arg("frames") = std::vector<FrameTuple>{},
           "frames: innermost first, (function, file, line, inlined, type_argument_size) each.")
      .def("add_type", [](TableCodeNames& t, uint64_t tag, const std::string& name) { t.types[tag] = name; },
           py::arg("tag"), py::arg("name"));

  py::class_<core::SymbolizerCodeNames, CodeNames, std::shared_ptr<core::SymbolizerCodeNames>>(
      m, "SymbolizerCodeNames", "Code and type names from a Symbolizer (kept alive as long as these names).")
      .def(py::init([](symbolize::Symbolizer* symbolizer) {
             return std::make_shared<core::SymbolizerCodeNames>(symbolizer);
           }),
           py::arg("symbolizer"), py::keep_alive<1, 2>());
}

}  // namespace bindings
}  // namespace heaptype
