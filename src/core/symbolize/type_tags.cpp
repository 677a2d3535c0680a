#include "type_tags.hpp"

#include "../cxx_names.hpp"

#include <elf.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "../demangle.hpp"
#include "errors.hpp"

namespace heaptype {
namespace symbolize {

const char kMangledTagPrefix[] = "_ZN8heaptype7type_idI";
const char kMangledTypeinfoPrefix[] = "_ZTI";

namespace {

const std::string kDemangledTagPrefix = "heaptype::type_id<";
const std::string kDemangledTagSuffix = ">::tag";
const std::string kLabeledPrefix = "heaptype::labeled<";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string trim(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && is_space(s[begin])) ++begin;
  while (end > begin && is_space(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

const std::string kElementsOfPrefix = "heaptype::elements_of<";

// The two template arguments of "<prefix>A, B>", if `name` is one.
std::optional<std::vector<std::string>> argument_pair(const std::string& name, const std::string& prefix) {
  if (!starts_with(name, prefix) || !ends_with(name, ">")) return std::nullopt;
  auto args = core::split_template_arguments(name.substr(prefix.size(), name.size() - prefix.size() - 1));
  if (!args || args->size() != 2) return std::nullopt;
  for (std::string& arg : *args) arg = trim(arg);
  return args;
}

// The standard library's string classes by the names programs use for them, whatever
// the library's inline namespace (std::__cxx11 for libstdc++, std::__1 for libc++).
std::string owner_name(const std::string& owner) {
  static const std::pair<const char*, const char*> strings[] = {
      {"char", "std::string"}, {"wchar_t", "std::wstring"}, {"char8_t", "std::u8string"},
      {"char16_t", "std::u16string"}, {"char32_t", "std::u32string"}};
  for (const char* prefix : {"std::basic_string<", "std::__cxx11::basic_string<", "std::__1::basic_string<"}) {
    for (const auto& entry : strings) {
      std::string c = entry.first;
      for (const char* ns : {"std::", "std::__cxx11::", "std::__1::"}) {
        if (owner == prefix + c + ", " + ns + "char_traits<" + c + ">, " + ns + "allocator<" + c + ">>") {
          return entry.second;
        }
      }
    }
  }
  return owner;
}

std::string render_type(const std::string& name) {
  if (auto labeled = argument_pair(name, kLabeledPrefix)) return render_type((*labeled)[0]) + " [" + (*labeled)[1] + "]";
  // heaptype::elements_of<E, Owner>: the elements a standard class allocates for itself.
  if (auto elements = argument_pair(name, kElementsOfPrefix)) {
    return render_type((*elements)[0]) + "[] of " + owner_name((*elements)[1]);
  }
  return name;
}

// {address: symbol as found (mangled or not)} -> {address: type name}.
TagMap names_by_address(const std::map<uint64_t, std::string>& raw) {
  TagMap out;
  for (const auto& entry : raw) {
    const std::string& symbol = entry.second;
    auto name = type_name_from_symbol(starts_with(symbol, "_Z") ? core::demangle(symbol) : symbol);
    if (name) out[entry.first] = std::move(*name);
  }
  return out;
}

uint64_t parse_hex(const std::string& text, size_t begin, size_t end) {
  uint64_t value = 0;
  for (size_t i = begin; i < end; ++i) {
    char c = text[i];
    value = value * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return value;
}

// One line of a map file's memory map naming a tag: one or more numeric
// columns, then the symbol alone. bfd/gold: "0x0000000000004041    heaptype::
// type_id<Foo>::tag"; lld: "3d21  3d21  1  1    heaptype::type_id<Foo>::tag"
// (VMA first). Input-section lines such as ".bss._ZN8heaptype..." or
// "a.o:(.bss._ZN8heaptype...)" do not match: text other than numbers comes first.
bool parse_map_symbol_line(const std::string& line, uint64_t* address, std::string* name) {
  size_t pos = 0, columns = 0;
  while (pos < line.size() && is_space(line[pos])) ++pos;
  for (;;) {
    size_t begin = pos;
    if (line.compare(pos, 2, "0x") == 0) pos += 2;
    size_t digits = pos;
    while (pos < line.size() && is_hex(line[pos])) ++pos;
    size_t digits_end = pos;
    size_t spaces = pos;
    while (pos < line.size() && is_space(line[pos])) ++pos;
    if (digits_end == digits || pos == spaces) {  // not a number followed by blanks: the name starts here
      pos = begin;
      break;
    }
    if (columns++ == 0) *address = parse_hex(line, digits, digits_end);
  }
  if (columns == 0) return false;
  std::string rest = trim(line.substr(pos));
  bool demangled = starts_with(rest, kDemangledTagPrefix) && ends_with(rest, kDemangledTagSuffix);
  bool mangled = starts_with(rest, kMangledTagPrefix);
  for (char c : rest) mangled = mangled && !is_space(c);
  if (!demangled && !mangled) return false;
  *name = std::move(rest);
  return true;
}

// The relocation types that write a symbol's address plus addend, and the load address
// plus addend, on this module's machine; false for a machine not known here.
bool absolute_and_relative(const ElfFile& file, uint32_t* absolute, uint32_t* relative) {
  switch (file.machine()) {
    case EM_X86_64:
      *absolute = R_X86_64_64;
      *relative = R_X86_64_RELATIVE;
      return true;
    case EM_AARCH64:
      *absolute = R_AARCH64_ABS64;
      *relative = R_AARCH64_RELATIVE;
      return true;
    default:
      return false;
  }
}

// A vtable of one of the C++ ABI's type_info classes (__cxxabiv1::__class_type_info,
// __si_class_type_info, __fundamental_type_info...), maybe with a symbol version.
bool is_type_info_vtable(const char* symbol) {
  static const char kPrefix[] = "_ZTVN10__cxxabiv1";
  static const std::string kSuffix = "_type_infoE";
  if (std::strncmp(symbol, kPrefix, sizeof kPrefix - 1) != 0) return false;
  std::string name(symbol, std::strcspn(symbol, "@"));
  return ends_with(name, kSuffix);
}

// The mangled type name a type_info's name pointer at `address` points to ("13PDNSException",
// "*N12_GLOBAL__N_13FooE" for a type the linker must not merge), without the '*'.
std::string type_info_name_at(const ElfFile& file, uint64_t address) {
  std::string bytes = file.bytes_at(address, 4096);
  size_t end = bytes.find('\0');
  if (end == std::string::npos) return "";
  bytes.resize(end);
  if (!bytes.empty() && bytes[0] == '*') bytes.erase(0, 1);
  return bytes;
}

}  // namespace

std::map<uint64_t, std::string> relocated_typeinfos(const ElfFile& file) {
  std::map<uint64_t, std::string> out;
  uint32_t absolute = 0, relative = 0;
  if (!absolute_and_relative(file, &absolute, &relative)) return out;
  // A std::type_info object starts with its class's vtable pointer (vtable + 16, a
  // relocation naming the vtable, which lives in libstdc++ or libc++abi) and holds
  // the address of its mangled name next.
  std::unordered_set<uint64_t> objects;
  file.for_each_relocation([&](const GElf_Rela& rela, const char* symbol) {
    if (GELF_R_TYPE(rela.r_info) == absolute && rela.r_addend == 16 && is_type_info_vtable(symbol))
      objects.insert(rela.r_offset);
  });
  if (objects.empty()) return out;
  std::unordered_map<uint64_t, uint64_t> name_address;  // by object: a position-independent module's
  file.for_each_relocation([&](const GElf_Rela& rela, const char*) {
    if (GELF_R_TYPE(rela.r_info) == relative && objects.count(rela.r_offset - 8))
      name_address[rela.r_offset - 8] = static_cast<uint64_t>(rela.r_addend);
  });
  for (uint64_t object : objects) {
    uint64_t name = 0;
    auto found = name_address.find(object);
    if (found != name_address.end()) {
      name = found->second;
    } else {  // a fixed-address executable: the address is in the file
      std::string word = file.bytes_at(object + 8, 8);
      if (word.size() != 8) continue;
      for (int i = 7; i >= 0; --i) name = name << 8 | static_cast<unsigned char>(word[static_cast<size_t>(i)]);
    }
    std::string mangled = type_info_name_at(file, name);
    if (!mangled.empty()) out[object] = std::string(kMangledTypeinfoPrefix) + mangled;
  }
  return out;
}

namespace {

bool is_memory_map_header(const std::string& stripped) {
  return stripped == "Memory Configuration" || stripped == "Linker script and memory map" ||
         stripped == "Memory map";
}

}  // namespace


std::optional<std::string> type_name_from_symbol(const std::string& demangled) {
  std::string text = trim(demangled);
  if (!starts_with(text, kDemangledTagPrefix) || !ends_with(text, kDemangledTagSuffix)) return std::nullopt;
  if (text.size() <= kDemangledTagPrefix.size() + kDemangledTagSuffix.size()) return std::nullopt;
  std::string inner = trim(text.substr(kDemangledTagPrefix.size(),
                                       text.size() - kDemangledTagPrefix.size() - kDemangledTagSuffix.size()));
  // Rejects e.g. "heaptype::type_id<A>::x<B>::tag", whose brackets do not pair up.
  if (inner.empty() || !core::split_template_arguments(inner)) return std::nullopt;
  return render_type(core::collapse_closing_brackets(inner));
}

std::optional<std::string> type_name_from_typeinfo(const std::string& demangled) {
  static const std::string prefix = "typeinfo for ";
  std::string text = trim(demangled);
  if (!starts_with(text, prefix) || text.size() == prefix.size()) return std::nullopt;
  return core::collapse_closing_brackets(text.substr(prefix.size()));
}

ElfTags read_elf_type_tags(const ElfFile& file) {
  std::map<uint64_t, std::string> raw, typeinfos;
  const size_t prefix_size = std::strlen(kMangledTagPrefix), typeinfo_prefix_size = std::strlen(kMangledTypeinfoPrefix);
  auto collect = [&](const GElf_Sym& sym, const char* name) {
    if (sym.st_shndx == SHN_UNDEF) return;  // undefined (imported) symbols are not tags of this module
    if (std::strncmp(name, kMangledTagPrefix, prefix_size) == 0) raw[sym.st_value] = name;
    // A copy of a shared library's typeinfo in the executable (a copy relocation:
    // `throw 1`'s typeinfo for int) is named "_ZTIi@CXXABI_1.3" in .symtab.
    if (std::strncmp(name, kMangledTypeinfoPrefix, typeinfo_prefix_size) == 0)
      typeinfos[sym.st_value] = std::string(name, std::strcspn(name, "@"));
  };
  file.for_each_symbol(SHT_DYNSYM, collect);
  ElfTags out;
  out.has_symtab = file.for_each_symbol(SHT_SYMTAB, collect);  // second: .symtab wins
  out.tags = names_by_address(raw);
  if (!out.has_symtab) typeinfos.merge(relocated_typeinfos(file));  // the symbols' names win
  for (const auto& entry : typeinfos)
    if (auto name = type_name_from_typeinfo(core::demangle(entry.second))) out.typeinfos[entry.first] = *name;
  return out;
}

TagMap map_file_type_tags(const std::string& map_path) {
  std::ifstream in(map_path);
  if (!in) throw SymbolError("cannot read " + map_path + ": " + std::strerror(errno));
  std::map<uint64_t, std::string> raw;
  bool skipping = false;  // inside "Discarded input sections"
  std::string line, name;
  while (std::getline(in, line)) {
    std::string stripped = trim(line);
    if (stripped == "Discarded input sections") {
      skipping = true;
    } else if (is_memory_map_header(stripped) && !line.empty() && !is_space(line[0])) {
      skipping = false;
    } else if (!skipping) {
      uint64_t address = 0;
      if (parse_map_symbol_line(line, &address, &name)) raw[address] = name;
    }
  }
  if (in.bad()) throw SymbolError("cannot read " + map_path + ": " + std::strerror(errno));
  return names_by_address(raw);
}

}  // namespace symbolize
}  // namespace heaptype
