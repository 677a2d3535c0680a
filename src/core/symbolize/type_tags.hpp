// type_tags.hpp: link-time addresses of type tags -> C++ type names.
//
// A profile records, for each heap type T, the runtime address of the one-byte
// static heaptype::type_id<T>::tag. Its link-time address and name come from
// the module's ELF symbol table (.symtab, else .dynsym) or, for a stripped
// binary, from the linker map file written by -Wl,-Map=FILE (GNU ld.bfd, gold
// or lld, names demangled or not).
#ifndef HEAPTYPE_CORE_SYMBOLIZE_TYPE_TAGS_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_TYPE_TAGS_HPP

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "elf_file.hpp"

namespace heaptype {
namespace symbolize {

// Every tag symbol, and nothing else we care about, starts with this.
extern const char kMangledTagPrefix[];

using TagMap = std::map<uint64_t, std::string>;  // link-time address -> type name

// T for a demangled "heaptype::type_id<T>::tag", else nullopt. "> >" becomes
// ">>" as C++11 code writes it; heaptype::labeled<T, L> renders as "T [L]",
// heaptype::elements_of<E, Owner> as "E[] of Owner" (the standard strings by their
// usual names: "char[] of std::string").
std::optional<std::string> type_name_from_symbol(const std::string& demangled);

// T for a demangled "typeinfo for T", else nullopt. A thrown object's type tag is
// the address of its std::type_info (see src/runtime/exception_types.hpp).
std::optional<std::string> type_name_from_typeinfo(const std::string& demangled);

struct ElfTags {
  TagMap tags;
  // The module's std::type_info objects ("typeinfo for T" symbols, _ZTI...), by
  // address: the tags of thrown objects. Kept apart from `tags`, the types the
  // module's code can allocate.
  TagMap typeinfos;
  bool has_symtab = false;  // the complete table was there: no map file needed
};

// Tags and typeinfos from .symtab and .dynsym (.symtab wins at one address).
// GCC's tags are STB_GNU_UNIQUE and so often exported: a stripped binary may still
// name them; a shared library's typeinfos are usually exported too. A stripped
// module's other typeinfos are read from its dynamic relocations (relocated_typeinfos).
ElfTags read_elf_type_tags(const ElfFile& file);

// A module's std::type_info objects found from its dynamic relocations, which `strip`
// keeps: each one whose first word is relocated to a C++ ABI type_info vtable, by
// address, as "_ZTI" + the mangled name it points to. (A static executable has no
// dynamic relocations: its thrown types need its symbols.)
std::map<uint64_t, std::string> relocated_typeinfos(const ElfFile& file);

// Tags from a GNU ld.bfd, gold or lld map file; only its memory map counts
// (bfd and gold also list discarded COMDAT copies, at address 0). Throws
// SymbolError naming the file when it cannot be read.
TagMap map_file_type_tags(const std::string& map_path);

}  // namespace symbolize
}  // namespace heaptype

#endif
