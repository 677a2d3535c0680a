// elf_file.hpp: one ELF file opened with libelf, and the few things the
// symbolizer reads from it without DWARF: build id, PT_LOAD segments, symbols.
#ifndef HEAPTYPE_CORE_SYMBOLIZE_ELF_FILE_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_ELF_FILE_HPP

#include <gelf.h>
#include <libelf.h>

#include <functional>
#include <string>
#include <vector>

#include "module_map.hpp"

namespace heaptype {
namespace symbolize {

class ElfFile {
 public:
  // Throws SymbolError naming the file when it cannot be opened, NotElfError
  // when it is not ELF.
  explicit ElfFile(const std::string& path);
  ~ElfFile();
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  const std::string& path() const { return path_; }
  Elf* elf() const { return elf_; }

  // The GNU build id in hex, "" when the file has none.
  std::string build_id() const;
  // PT_LOAD segments sorted by vaddr; throws SymbolError when there is none.
  std::vector<Segment> load_segments() const;
  // True when the file has a section of this type (SHT_SYMTAB, SHT_PROGBITS...)
  // and, if `name` is given, that name.
  bool has_section(Elf64_Word type, const char* name = nullptr) const;

  // Calls visit(symbol, name) for each symbol of the first section of `type`
  // (SHT_SYMTAB or SHT_DYNSYM); false when there is no such table.
  using SymbolVisitor = std::function<void(const GElf_Sym&, const char* name)>;
  bool for_each_symbol(Elf64_Word type, const SymbolVisitor& visit) const;

  // Calls visit(relocation, name of its symbol or "") for each entry of every SHT_RELA
  // section (a module's dynamic relocations survive `strip`).
  using RelocationVisitor = std::function<void(const GElf_Rela&, const char* symbol)>;
  void for_each_relocation(const RelocationVisitor& visit) const;
  // The file's bytes at link-time address `vaddr` (within a PT_LOAD segment's file part),
  // at most `size` of them; empty when the address is not backed by the file.
  std::string bytes_at(uint64_t vaddr, size_t size) const;
  Elf64_Half machine() const;  // EM_X86_64, EM_AARCH64...

 private:
  Elf_Scn* find_section(Elf64_Word type, const char* name) const;

  std::string path_;
  int fd_ = -1;
  Elf* elf_ = nullptr;
};

// Hex of a byte string: a build id as the debug directories and caches name it.
std::string to_hex(const unsigned char* bytes, size_t size);

}  // namespace symbolize
}  // namespace heaptype

#endif
