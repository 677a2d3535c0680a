// symbolize_bindings.cpp: the pybind11 face of src/core/symbolize. Typed,
// read-only classes; long calls release the GIL.
#include "symbolize_bindings.hpp"

#include <pybind11/functional.h>
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <unordered_map>

#include "bindings.hpp"
#include "core/symbolize/elf_file.hpp"
#include "core/cxx_names.hpp"
#include "core/symbolize/symbolizer.hpp"
#include "core/symbolize/type_tags.hpp"

namespace py = pybind11;
namespace sym = heaptype::symbolize;

namespace {

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::vector<sym::Mapping> mappings_from(const py::object& modules) {
  if (py::isinstance<py::str>(modules)) return sym::parse_module_map(heaptype::bindings::path_bytes(modules));
  return modules.cast<std::vector<sym::Mapping>>();
}

// progress: True (stderr), False/None (silent) or a callable(text, fraction, finished).
sym::ProgressFn progress_from(const py::object& progress) {
  if (progress.is_none() || (py::isinstance<py::bool_>(progress) && !progress.cast<bool>())) return nullptr;
  if (py::isinstance<py::bool_>(progress)) return sym::stderr_progress();
  auto callback = std::make_shared<py::object>(progress);
  return [callback](const sym::ProgressEvent& event) {
    py::gil_scoped_acquire gil;
    (*callback)(heaptype::core::progress_text(event), event.fraction, event.finished);
  };
}

std::unique_ptr<sym::Symbolizer> make_symbolizer(const py::object& modules, const py::object& executable,
                                                 const std::optional<std::string>& cache_dir,
                                                 const std::map<std::string, std::string>& map_files, bool lines,
                                                 const std::optional<std::vector<std::string>>& debug_roots,
                                                 const py::object& progress, double progress_delay) {
  sym::Options options;
  options.cache_dir = cache_dir.value_or("");
  options.map_files = map_files;
  options.lines = lines;
  if (debug_roots) options.debug_roots = *debug_roots;
  options.progress = progress_from(progress);
  options.progress_delay = progress_delay;
  return std::make_unique<sym::Symbolizer>(mappings_from(modules), heaptype::bindings::path_bytes(executable),
                                           std::move(options));
}

std::vector<sym::Location> resolve_all(sym::Symbolizer& s, const std::vector<uint64_t>& addresses, bool calls) {
  py::gil_scoped_release release;
  if (calls)
    s.prefetch_call_sites(addresses);
  else
    s.prefetch_functions(addresses);
  std::vector<sym::Location> out;
  out.reserve(addresses.size());
  for (uint64_t a : addresses) out.push_back(calls ? s.call_site(a) : s.function_at(a));
  return out;
}

// Plain tuples for many locations at once: the Python wrapper turns them into
// its dataclasses. Equal strings become one Python object (names repeat a lot),
// which also makes the wrapper's dictionary lookups cheap.
class TupleMaker {
 public:
  py::tuple location(const sym::Location& l) {
    py::tuple frames(l.frames.size());
    for (size_t i = 0; i < l.frames.size(); ++i) {
      const sym::Frame& f = l.frames[i];
      frames[i] = py::make_tuple(str(f.function), optional_str(f.file), f.line, f.inlined,
                                 f.type_argument_size ? py::int_(f.type_argument_size) : py::object(py::none()));
    }
    bool known = !l.module.empty();
    return py::make_tuple(l.address, known ? py::object(heaptype::bindings::path_text(l.module)) : py::object(py::none()), known ? py::int_(l.module_offset) : py::object(py::none()),
                          optional_str(l.function),
                          l.function_address ? py::int_(l.function_address) : py::object(py::none()), frames);
  }

 private:
  py::object str(const std::string& s) {
    auto found = strings_.find(s);
    if (found != strings_.end()) return found->second;
    return strings_.emplace(s, heaptype::bindings::name_text(s)).first->second;
  }
  py::object optional_str(const std::string& s) { return s.empty() ? py::object(py::none()) : str(s); }

  std::unordered_map<std::string, py::object> strings_;
};

py::list location_tuples(sym::Symbolizer& s, const std::vector<uint64_t>& addresses, bool calls) {
  {
    py::gil_scoped_release release;
    if (calls)
      s.prefetch_call_sites(addresses);
    else
      s.prefetch_functions(addresses);
  }
  TupleMaker maker;
  py::list out(addresses.size());
  for (size_t i = 0; i < addresses.size(); ++i)
    out[i] = maker.location(calls ? s.call_site(addresses[i]) : s.function_at(addresses[i]));
  return out;
}

py::dict tag_dict(const sym::TagMap& tags) {
  py::dict out;
  for (const auto& tag : tags) out[py::int_(tag.first)] = tag.second;
  return out;
}

void bind_values(py::module_& m) {
  py::class_<sym::Mapping>(m, "Mapping", "One line of /proc/self/maps that is backed by a file.")
      .def(py::init([](uint64_t start, uint64_t end, uint64_t offset, std::string perms, std::string path) {
             return sym::Mapping{start, end, offset, std::move(perms), std::move(path)};
           }),
           py::arg("start"), py::arg("end"), py::arg("offset"), py::arg("perms"), py::arg("path"))
      .def_readonly("start", &sym::Mapping::start, "first address of the mapping")
      .def_readonly("end", &sym::Mapping::end, "one past its last address")
      .def_readonly("offset", &sym::Mapping::offset, "file offset of its first byte")
      .def_readonly("perms", &sym::Mapping::perms, "permissions, e.g. 'r-xp'")
      .def_property_readonly("path", [](const sym::Mapping& x) { return heaptype::bindings::path_text(x.path); },
                             "the mapped file")
      .def(py::self == py::self)
      .def("__hash__", [](const sym::Mapping& x) {
        return py::hash(py::make_tuple(x.start, x.end, x.offset, x.perms, py::bytes(x.path)));
      })
      .def("__repr__", [](const sym::Mapping& x) {
        return "Mapping(start=" + std::to_string(x.start) + ", end=" + std::to_string(x.end) +
               ", offset=" + std::to_string(x.offset) + ", perms='" + x.perms + "', path='" + x.path + "')";
      });

  py::class_<sym::Frame>(m, "Frame", "One function at a code address: the function itself, or one inlined into it.")
      .def_readonly("function", &sym::Frame::function, "its name (demangled)")
      .def_readonly("file", &sym::Frame::file, "source file, '' unknown")
      .def_readonly("line", &sym::Frame::line,
                    "line in `function`: of the instruction (innermost frame) or of the inlined call; 0 unknown")
      .def_readonly("inlined", &sym::Frame::inlined, "inlined into the frame after it")
      .def_readonly("type_argument_size", &sym::Frame::type_argument_size,
                    "sizeof the first template type argument of the function or its class; 0 unknown")
      .def("__repr__", [](const sym::Frame& f) {
        return "Frame(" + f.function + " at " + f.file + ":" + std::to_string(f.line) + (f.inlined ? ", inlined)" : ")");
      });

  py::class_<sym::Location>(m, "Location", "What a code address is.")
      .def_readonly("address", &sym::Location::address, "the runtime address")
      .def_property_readonly("module", [](const sym::Location& l) { return heaptype::bindings::path_text(l.module); },
                             "the file holding it, '' when none")
      .def_readonly("module_offset", &sym::Location::module_offset, "its link-time address in the module")
      .def_readonly("function", &sym::Location::function, "the out-of-line function (symbol table name); '' unknown")
      .def_readonly("function_address", &sym::Location::function_address, "runtime entry of the function; 0 unknown")
      .def_readonly("frames", &sym::Location::frames, "innermost first: inlined functions, then the function")
      .def_property_readonly("name", &sym::Location::name, "the function, else module+0xoffset, else 0xaddress")
      .def("__repr__", [](const sym::Location& l) { return "Location(" + hex(l.address) + ": " + l.name() + ")"; });

  py::class_<sym::Stats>(m, "SymbolizeStats", "What one Symbolizer did.")
      .def_readonly("addresses", &sym::Stats::addresses, "distinct addresses asked for")
      .def_readonly("from_cache", &sym::Stats::from_cache, "answered by the on-disk (or in-process) cache")
      .def_readonly("decoded", &sym::Stats::decoded, "looked up in the binaries")
      .def_readonly("units", &sym::Stats::units, "DWARF compilation units indexed")
      .def_readonly("modules", &sym::Stats::modules, "readable modules holding some of the addresses")
      .def_readonly("dwarf_opened", &sym::Stats::dwarf_opened, "modules whose DWARF was opened")
      .def_readonly("symbol_tables_read", &sym::Stats::symbol_tables_read, "function symbol tables read")
      .def_readonly("type_tables_read", &sym::Stats::type_tables_read, "type-tag tables read from ELF symbols")
      .def_readonly("type_tables_from_cache", &sym::Stats::type_tables_from_cache, "type-tag tables from the cache")
      .def_readonly("seconds", &sym::Stats::seconds, "time spent in lookups")
      .def_readonly("cache_files", &sym::Stats::cache_files, "cache files of the modules involved");
}

void bind_symbolizer(py::module_& m) {
  py::class_<sym::Symbolizer>(m, "Symbolizer",
                              "Names code addresses and type tags of one profiled process (see symbolizer.hpp).")
      .def(py::init(&make_symbolizer), py::arg("modules"), py::arg("executable") = "",
           py::arg("cache_dir") = std::string(sym::kDefaultCacheDir), py::arg("map_files") = std::map<std::string, std::string>(),
           py::arg("lines") = true, py::arg("debug_roots") = py::none(), py::arg("progress") = true,
           py::arg("progress_delay") = 1.0,
           "modules: the module map (list of Mapping, or /proc/self/maps text). cache_dir: a directory, None "
           "for no cache, DEFAULT_CACHE_DIR for the environment's. progress: True (stderr), False, or "
           "callable(text, fraction, finished).")
      .def("for_modules",
           [](const sym::Symbolizer& earlier, const py::object& modules) {
             return std::make_unique<sym::Symbolizer>(mappings_from(modules), earlier);
           },
           py::arg("modules"),
           "A Symbolizer for another process of the same binaries (modules: its module map): what this one "
           "read of each file is shared, only the load addresses differ. The files must be unchanged.")
      .def("function_at", &sym::Symbolizer::function_at, py::arg("entry_address"))
      .def("call_site", &sym::Symbolizer::call_site, py::arg("return_address"))
      .def("functions", [](sym::Symbolizer& s, const std::vector<uint64_t>& a) { return resolve_all(s, a, false); },
           py::arg("entry_addresses"), "Locations of function entry addresses, in order (batched).")
      .def("call_sites", [](sym::Symbolizer& s, const std::vector<uint64_t>& a) { return resolve_all(s, a, true); },
           py::arg("return_addresses"), "Locations of return addresses, in order (batched).")
      .def("function_tuples",
           [](sym::Symbolizer& s, const std::vector<uint64_t>& a) { return location_tuples(s, a, false); },
           py::arg("entry_addresses"),
           "As functions(), as plain tuples (address, module, module_offset, function, function_address, "
           "frames), each frame (function, file, line, inlined, type_argument_size), None for unknowns.")
      .def("call_site_tuples",
           [](sym::Symbolizer& s, const std::vector<uint64_t>& a) { return location_tuples(s, a, true); },
           py::arg("return_addresses"), "As call_sites(), as plain tuples (see function_tuples).")
      .def("prefetch_functions", &sym::Symbolizer::prefetch_functions, py::call_guard<py::gil_scoped_release>())
      .def("prefetch_call_sites", &sym::Symbolizer::prefetch_call_sites, py::call_guard<py::gil_scoped_release>())
      .def("type_names", &sym::Symbolizer::type_names, py::arg("tags"), py::call_guard<py::gil_scoped_release>(),
           "{tag: type name}, '' for addresses that are no tag; raises SymbolError for a stripped module "
           "without map file.")
      .def_property_readonly("warnings",
                             [](const sym::Symbolizer& s) {
                               py::list out;
                               for (const std::string& w : s.warnings()) out.append(heaptype::bindings::name_text(w));
                               return out;
                             })
      .def_property_readonly("stats", &sym::Symbolizer::stats)
      .def("save_cache", &sym::Symbolizer::save_cache, py::call_guard<py::gil_scoped_release>());
}

void bind_functions(py::module_& m) {
  m.attr("DEFAULT_CACHE_DIR") = std::string(sym::kDefaultCacheDir);
  m.def("parse_module_map", [](const py::object& text) { return sym::parse_module_map(heaptype::bindings::path_bytes(text)); },
        py::arg("text"),
        "The file-backed mappings of /proc/self/maps text (other lines are ignored).");
  m.def("load_bias",
        [](const std::string& path, const std::vector<sym::Mapping>& mappings) {
          if (mappings.empty()) throw py::value_error("no mappings given for " + path);
          return sym::load_bias(sym::ElfFile(path).load_segments(), mappings);
        },
        py::arg("path"), py::arg("mappings"), "runtime address - link-time address of one module");
  m.def("elf_type_tags", [](const std::string& path) { return tag_dict(sym::read_elf_type_tags(sym::ElfFile(path)).tags); },
        py::arg("path"), "{link-time tag address: type name} from .symtab, then .dynsym");
  m.def("map_file_type_tags", [](const std::string& path) { return tag_dict(sym::map_file_type_tags(path)); },
        py::arg("path"), "{link-time tag address: type name} from a GNU ld.bfd, gold or lld map file");
  m.def("type_name_from_symbol", &sym::type_name_from_symbol, py::arg("demangled"),
        "T for a demangled 'heaptype::type_id<T>::tag', else None");
  m.def("split_template_arguments", &heaptype::core::split_template_arguments, py::arg("arguments"),
        "template arguments split on top-level commas, None when brackets do not pair");
  m.def("collapse_closing_brackets", &heaptype::core::collapse_closing_brackets, py::arg("name"));
  m.def("build_id", [](const std::string& path) { return sym::ElfFile(path).build_id(); }, py::arg("path"),
        "the GNU build id in hex, '' when none");
  m.def("default_cache_dir",
        []() -> std::optional<std::string> {
          std::string dir = sym::default_cache_dir();
          if (dir.empty()) return std::nullopt;
          return dir;
        },
        "the symbol cache directory the environment selects, None when caching is off");
}

}  // namespace

void bind_symbolize(py::module_& m) {
  auto symbol_error = py::register_exception<sym::SymbolError>(m, "SymbolError");
  py::register_exception<sym::NotElfError>(m, "NotElfError", symbol_error.ptr());
  bind_values(m);
  bind_symbolizer(m);
  bind_functions(m);
}
