// function_table.hpp: the function symbols of one ELF file, sorted by address,
// to name the out-of-line function that holds a code address (as `nm` does).
#ifndef HEAPTYPE_CORE_SYMBOLIZE_FUNCTION_TABLE_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_FUNCTION_TABLE_HPP

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "elf_file.hpp"

namespace heaptype {
namespace symbolize {

class FunctionTable {
 public:
  // Reads .symtab and .dynsym of `file`. One symbol per address: global names
  // before weak before local ones, sized before unsized, .symtab before .dynsym.
  // The names point into `file`, which must outlive the table.
  explicit FunctionTable(const ElfFile& file);

  struct Symbol {
    uint64_t start = 0;
    const char* name = nullptr;  // still mangled
  };
  // The function holding the link-time address pc; name null when none.
  Symbol find(uint64_t pc) const;
  size_t size() const { return starts_.size(); }
  // Whether the function of this mangled name starts a C++20 coroutine (its "ramp",
  // the function the program calls): the compiler's clones of its body are in the
  // table (GCC's `<ramp>.Frame.actor`, Clang's `<ramp>.resume`), and the one
  // allocation the ramp makes itself is the coroutine's frame.
  bool starts_coroutine(const std::string& name) const { return coroutine_ramps_.count(name) != 0; }

 private:
  std::vector<uint64_t> starts_;
  std::vector<uint64_t> sizes_;
  std::vector<const char*> names_;
  std::unordered_set<std::string> coroutine_ramps_;  // mangled names
};

// The mangled name of the coroutine whose body `clone` is, when it is one of the
// compiler's clones of a coroutine's body ("" otherwise): GCC names the clone
// `<anything><length><ramp>.Frame.actor`, the length that of "<ramp>.Frame";
// Clang `<ramp>.resume`.
std::string coroutine_of_clone(const char* clone);

}  // namespace symbolize
}  // namespace heaptype

#endif
