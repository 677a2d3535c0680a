// core_module.cpp: the pybind11 module heaptype._core, a thin layer over the C++
// core (src/format, src/core). Everything whose cost grows with the number of
// events stays in C++; the bindings only hand results to Python as typed objects.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "format/profile_file.hpp"
#include "symbolize_bindings.hpp"

namespace py = pybind11;

namespace heaptype {
namespace bindings {

py::str path_text(const std::string& bytes) {
  PyObject* text = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "surrogateescape");
  if (!text) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(text);
}

py::str name_text(const std::string& bytes) {
  PyObject* text = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
  if (!text) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(text);
}

std::string path_bytes(const py::handle& text) {
  if (!py::isinstance<py::str>(text)) return text.cast<std::string>();
  PyObject* bytes = PyUnicode_AsEncodedString(text.ptr(), "utf-8", "surrogateescape");
  if (!bytes) throw py::error_already_set();
  py::bytes owned = py::reinterpret_steal<py::bytes>(bytes);
  return owned.cast<std::string>();
}

}  // namespace bindings
}  // namespace heaptype

PYBIND11_MODULE(_core, m) {
  m.doc() = "HeapType analysis core: reading, aggregating and naming profiles in C++";
  py::register_exception<heaptype::format::ProfileError>(m, "ProfileError", PyExc_ValueError);
  heaptype::bindings::bind_profile_file(m);
  heaptype::bindings::bind_builder(m);
  heaptype::bindings::bind_names(m);
  heaptype::bindings::bind_analysis(m);
  heaptype::bindings::bind_budget_rows(m);
  bind_symbolize(m);
}
