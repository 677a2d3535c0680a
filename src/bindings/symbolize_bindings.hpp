// symbolize_bindings.hpp: adds the symbolizer's classes to the _core module.
#ifndef HEAPTYPE_BINDINGS_SYMBOLIZE_BINDINGS_HPP
#define HEAPTYPE_BINDINGS_SYMBOLIZE_BINDINGS_HPP

#include <pybind11/pybind11.h>

void bind_symbolize(pybind11::module_& m);

#endif
