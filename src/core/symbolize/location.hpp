// location.hpp: what a code address is (function, inlined frames, source lines).
#ifndef HEAPTYPE_CORE_SYMBOLIZE_LOCATION_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_LOCATION_HPP

#include <cstdint>
#include <string>
#include <vector>

namespace heaptype {
namespace symbolize {

// One function at a code address: the function itself, or one inlined into it.
// `line` is where in `function` the address is: for the innermost frame the line
// of the instruction, for an outer frame the line that called (and so inlined)
// the frame inside it. file "" and line 0 when unknown.
struct Frame {
  std::string function;
  std::string file;
  uint32_t line = 0;
  bool inlined = false;
  // sizeof the first template type argument of the function, else of its class,
  // when DWARF has it (inlined frames whose name suggests an allocator or factory
  // only): how big one T is for std::__new_allocator<T>::allocate. 0 unknown.
  uint64_t type_argument_size = 0;

  bool operator==(const Frame& o) const {
    return function == o.function && file == o.file && line == o.line && inlined == o.inlined &&
           type_argument_size == o.type_argument_size;
  }
};

// What a code address of the profiled process is.
struct Location {
  uint64_t address = 0;
  std::string module;          // the file holding it, "" when no module does
  uint64_t module_offset = 0;  // its link-time address in the module (or offset from the module's start
                               // when the module cannot be read)
  std::string function;        // the out-of-line function, symbol table name demangled; "" unknown
  uint64_t function_address = 0;  // its runtime entry; 0 unknown
  std::vector<Frame> frames;   // innermost first: inlined ones, then the function; empty without a function
  bool coroutine = false;      // the innermost function starts a C++20 coroutine (FunctionTable::starts_coroutine)

  // The function, else "module+0xoffset" (module's base name; the offset of the
  // function's start where its call frame information gives it), else "0xaddress".
  std::string name() const;
  // The link-time offset of the function's start (function_address known).
  uint64_t start_offset() const;
};

// What one link-time pc of a module is: the unit kept in the on-disk cache.
struct CodeInfo {
  bool found = false;       // a symbol or the debug info names it
  bool with_lines = false;  // looked up with DWARF allowed (else symbol tables only)
  std::string function;     // "" unknown
  bool has_start = false;   // `start` (link-time entry of the function's symbol) is known
  uint64_t start = 0;
  std::vector<Frame> frames;
  bool coroutine = false;  // the innermost function at pc starts a C++20 coroutine

  bool operator==(const CodeInfo& o) const {
    return found == o.found && with_lines == o.with_lines && function == o.function &&
           has_start == o.has_start && start == o.start && frames == o.frames && coroutine == o.coroutine;
  }
};

}  // namespace symbolize
}  // namespace heaptype

#endif
