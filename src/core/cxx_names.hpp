// cxx_names.hpp: reading demangled C++ names: the qualified name of a function
// without its return type and parameters, its `::` components with their
// template arguments, top-level template arguments.
#ifndef HEAPTYPE_CORE_CXX_NAMES_HPP
#define HEAPTYPE_CORE_CXX_NAMES_HPP

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace heaptype {
namespace core {

// "R ns::f<A>(P) const" -> "ns::f<A>"; also drops " [clone .cold]".
std::string strip_parameters(const std::string& function);

// "std::a<B>::c" -> {("std", ""), ("a", "B"), ("c", "")}; `has_args` says whether
// a component had a template argument list (possibly empty).
struct NameComponent {
  std::string name;
  std::string args;
  bool has_args = false;
};
std::vector<NameComponent> name_components(const std::string& qualified);

// Top-level comma-separated template arguments; nullopt when brackets do not pair.
// Brackets inside parentheses are skipped (the demangler parenthesises
// expressions such as `(1>2)`).
std::optional<std::vector<std::string>> split_template_arguments(const std::string& args);

// "> >" -> ">>", the way C++11 code writes it.
std::string collapse_closing_brackets(std::string name);

}  // namespace core
}  // namespace heaptype

#endif
