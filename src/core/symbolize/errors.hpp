// errors.hpp: the errors the symbolizer reports to its callers.
#ifndef HEAPTYPE_CORE_SYMBOLIZE_ERRORS_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_ERRORS_HPP

#include <stdexcept>
#include <string>

namespace heaptype {
namespace symbolize {

// A module that owns type tags offers no way to name them (stripped, no map
// file), or a file the caller named cannot be read. The message names the file.
class SymbolError : public std::runtime_error {
 public:
  explicit SymbolError(const std::string& message) : std::runtime_error(message) {}
};

// A file that exists and can be read but is not ELF (a mapped font, a data file).
class NotElfError : public SymbolError {
 public:
  explicit NotElfError(const std::string& message) : SymbolError(message) {}
};

}  // namespace symbolize
}  // namespace heaptype

#endif
