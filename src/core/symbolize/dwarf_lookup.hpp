// dwarf_lookup.hpp: functions, inlined frames and source lines of code
// addresses, from one module's DWARF through elfutils' libdw.
//
// The module is opened with libdwfl, which also finds separate debug files
// (by build id under the debug roots, by .gnu_debuglink beside the file, in its
// .debug/ folder or under a debug root). Work is lazy and per compilation unit:
// the units' address ranges are read once, and a unit's functions are indexed
// the first time an address falls into it; other units are never decoded.
#ifndef HEAPTYPE_CORE_SYMBOLIZE_DWARF_LOOKUP_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_DWARF_LOOKUP_HPP

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace heaptype {
namespace symbolize {

// One function at an address as DWARF names it: the linkage name (mangled)
// when its DIEs have one, else the source name, qualified by its namespaces
// and classes in C++.
struct RawFrame {
  std::string name;
  std::string file;  // "" unknown
  uint32_t line = 0;
  uint64_t type_argument_size = 0;  // see Frame::type_argument_size
  // An inlined function that DWARF names without a linkage name (GCC gives none to a
  // function of internal linkage: static, or in an anonymous namespace): where its
  // out-of-line copy in the same unit starts, if it has one, so that the symbol table
  // names it as it names that copy; else 0.
  uint64_t out_of_line_start = 0;
};

class DwarfLookup {
 public:
  DwarfLookup(const std::string& path, const std::vector<std::string>& debug_roots);
  ~DwarfLookup();
  DwarfLookup(const DwarfLookup&) = delete;
  DwarfLookup& operator=(const DwarfLookup&) = delete;

  bool has_dwarf() const { return dwarf_ != nullptr; }
  // The file the DWARF was read from: the module itself or its separate debug file.
  const std::string& debug_file() const { return debug_file_; }

  // The functions at link-time address pc, outermost first (the function, then
  // those inlined into it), each with the line inside it: for the innermost the
  // line of the instruction, for the others the line that inlined the next.
  // Empty when no DWARF function holds pc.
  std::vector<RawFrame> frames_at(uint64_t pc);

  size_t units_indexed() const { return units_indexed_; }

 private:
  struct FunctionRange {
    uint64_t low, high;
    Dwarf_Off die;
  };
  struct Unit {
    Dwarf_Off die_offset = 0;
    bool indexed = false;
    bool scoped = true;  // names nest in namespaces and classes (C++, not C)
    std::string comp_dir;
    std::vector<FunctionRange> functions;  // sorted by low
    std::vector<uint64_t> reach;           // reach[i] = max high of functions[0..i]
  };
  struct UnitRange {
    uint64_t low, high;
    size_t unit;
  };
  // The code scopes of one function (inlined subroutines, lexical blocks...),
  // read once: a big function holds many call sites, and walking its DIEs again
  // for each one costs more than everything else together.
  struct Scope {
    Dwarf_Die die;
    bool frame = false;  // an inlined subroutine or nested function: a frame of its own
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    std::vector<uint32_t> children;  // in DIE order
  };
  using FunctionScopes = std::vector<Scope>;  // [0]: the function itself

  void read_units();
  Unit* unit_at(uint64_t pc);
  Unit* unit_of_die(Dwarf_Die* die);
  void index_unit(Unit& unit);
  void collect_functions(Dwarf_Die* parent, Dwarf_Off parent_offset, Unit& unit);
  bool function_at(const Unit& unit, uint64_t pc, Dwarf_Die* out);
  const FunctionScopes& scopes_of(Dwarf_Die function);
  std::vector<Dwarf_Die> scopes_at(Dwarf_Die function, uint64_t pc);
  std::string line_file(const Unit& unit, const char* raw);
  std::string call_file(Unit& unit, Dwarf_Die* inlined);
  std::string name_of(Dwarf_Die* die, const Unit& unit);
  std::string qualified(Dwarf_Off die, const std::string& name);
  std::string qualified_in_body(Dwarf_Die* die, const std::string& name);
  bool enclosing_dies(Dwarf_Die* target, std::vector<Dwarf_Die>* out);
  uint64_t type_argument_size(Dwarf_Die* die);
  uint64_t find_type_argument_size(Dwarf_Die* die);
  uint64_t enclosing_class_argument_size(Dwarf_Die* declaration);

  std::string path_;
  std::vector<std::string> debug_roots_;
  std::string debuginfo_path_;
  char* debuginfo_path_pointer_ = nullptr;
  Dwfl_Callbacks callbacks_{};
  Dwfl* dwfl_ = nullptr;
  Dwarf* dwarf_ = nullptr;
  Dwarf_Addr bias_ = 0;  // module address - DWARF address
  std::string debug_file_;

  std::vector<Unit> units_;
  std::vector<UnitRange> unit_ranges_;  // sorted by low
  std::vector<uint64_t> unit_reach_;    // as Unit::reach
  std::unordered_map<Dwarf_Off, size_t> unit_by_die_;
  // Subprograms and scopes inside namespaces or classes -> that namespace or class.
  std::unordered_map<Dwarf_Off, Dwarf_Off> parents_;
  std::unordered_map<Dwarf_Off, std::string> names_;
  // An abstract function's DIE -> the low pc of its out-of-line copy (a subprogram with
  // code whose abstract origin it is), in the units indexed so far.
  std::unordered_map<Dwarf_Off, uint64_t> out_of_line_starts_;
  std::unordered_map<Dwarf_Off, FunctionScopes> function_scopes_;
  std::unordered_map<Dwarf_Off, uint64_t> type_argument_sizes_;
  std::unordered_map<const char*, std::string> file_names_;
  size_t units_indexed_ = 0;
};

// "a/./b//../c" -> "a/c", as os.path.normpath does (lexically, no file system).
std::string normalize_path(const std::string& path);

}  // namespace symbolize
}  // namespace heaptype

#endif
