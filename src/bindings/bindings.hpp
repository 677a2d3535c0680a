// bindings.hpp: the pieces of the pybind11 module heaptype._core, one file each.
#ifndef HEAPTYPE_BINDINGS_BINDINGS_HPP
#define HEAPTYPE_BINDINGS_BINDINGS_HPP

#include <pybind11/pybind11.h>

#include <string>

namespace heaptype {
namespace bindings {

// Text from a profile (names, paths) as str: invalid UTF-8 (a Latin-1 argument, a
// path in another encoding) must not raise. Paths keep their bytes
// (surrogateescape, as os.fsdecode); names shown to people get U+FFFD.
pybind11::str path_text(const std::string& bytes);
pybind11::str name_text(const std::string& bytes);
// The bytes of a path handed back from Python: str is encoded as os.fsencode does
// (surrogateescape), so that a path_text() result reaches C++ as the bytes it was.
std::string path_bytes(const pybind11::handle& text);

void bind_profile_file(pybind11::module_& m);
void bind_builder(pybind11::module_& m);
void bind_names(pybind11::module_& m);
void bind_analysis(pybind11::module_& m);
void bind_budget_rows(pybind11::module_& m);

}  // namespace bindings
}  // namespace heaptype

#endif
