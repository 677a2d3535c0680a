// function_table.hpp: the function symbols of one ELF file, sorted by address,
// to name the out-of-line function that holds a code address (as `nm` does).
#ifndef HEAPTYPE_CORE_SYMBOLIZE_FUNCTION_TABLE_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_FUNCTION_TABLE_HPP

#include <cstdint>
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

 private:
  std::vector<uint64_t> starts_;
  std::vector<uint64_t> sizes_;
  std::vector<const char*> names_;
};

}  // namespace symbolize
}  // namespace heaptype

#endif
