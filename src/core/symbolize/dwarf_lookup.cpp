#include "dwarf_lookup.hpp"

#include "../demangle.hpp"

#include <dwarf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace heaptype {
namespace symbolize {
namespace {

constexpr int kMaxOriginHops = 8;     // abstract_origin / specification chains
constexpr int kMaxScopeDepth = 64;    // DIEs nested in a unit, looked through for a local class
constexpr int kMaxTypeHops = 16;      // typedef / qualifier chains
// Frames whose template argument's size a report may need (type inference);
// matched against linkage names (mangled) or plain source names.
const char* const kSizedFrames[] = {"allocat", "make_unique", "make_shared", "10make_uniq", "11make_shared",
                                    "basic_string"};

// The debug roots of the DwarfLookup opening a module right now, for the
// .gnu_debuglink search below (libdwfl's callback has no user pointer).
thread_local const std::vector<std::string>* t_debug_roots = nullptr;

bool is_container(int tag) {
  return tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
         tag == DW_TAG_union_type || tag == DW_TAG_module;
}

bool is_name_scope(int tag) {
  return tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
         tag == DW_TAG_union_type;
}

bool is_code_scope(int tag) {
  return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
         tag == DW_TAG_try_block || tag == DW_TAG_catch_block;
}

// C and assembler do not nest function names in scopes.
bool is_flat_language(Dwarf_Word language) {
  return language == DW_LANG_C89 || language == DW_LANG_C || language == DW_LANG_C99 || language == 0x001d ||
         language == 0x002c || language == DW_LANG_Mips_Assembler;  // 0x1d C11, 0x2c C17
}

const char* string_attribute(Dwarf_Die* die, unsigned name) {
  Dwarf_Attribute attr;
  return dwarf_attr(die, name, &attr) ? dwarf_formstring(&attr) : nullptr;
}

bool unsigned_attribute(Dwarf_Die* die, unsigned name, Dwarf_Word* out) {
  Dwarf_Attribute attr;
  return dwarf_attr(die, name, &attr) && dwarf_formudata(&attr, out) == 0;
}

bool follow(Dwarf_Die* die, unsigned name, Dwarf_Die* out) {
  Dwarf_Attribute attr;
  return dwarf_attr(die, name, &attr) && dwarf_formref_die(&attr, out) != nullptr;
}

// The DIE an abstract origin or specification points to; false when it has neither.
bool origin_of(Dwarf_Die* die, Dwarf_Die* out) {
  Dwarf_Attribute attr;
  if (dwarf_attr(die, DW_AT_abstract_origin, &attr)) return dwarf_formref_die(&attr, out) != nullptr;
  if (dwarf_attr(die, DW_AT_specification, &attr)) return dwarf_formref_die(&attr, out) != nullptr;
  return false;
}

std::vector<Dwarf_Die> origin_chain(Dwarf_Die* die) {
  std::vector<Dwarf_Die> out{*die};
  Dwarf_Die next;
  while (out.size() < kMaxOriginHops && origin_of(&out.back(), &next)) out.push_back(next);
  return out;
}

// The byte size of the type a DIE refers to, through typedefs, qualifiers and
// arrays (std::make_unique<T[]>: the element's size); 0 unknown.
uint64_t referenced_byte_size(Dwarf_Die* die) {
  Dwarf_Die current = *die;
  for (int hop = 0; hop < kMaxTypeHops; ++hop) {
    Dwarf_Die type;
    if (!follow(&current, DW_AT_type, &type)) return 0;
    current = type;
    Dwarf_Word size = 0;
    if (unsigned_attribute(&current, DW_AT_byte_size, &size)) return size;
    int tag = dwarf_tag(&current);
    if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type &&
        tag != DW_TAG_restrict_type && tag != DW_TAG_atomic_type && tag != DW_TAG_array_type)
      return 0;
  }
  return 0;
}

// The size of the first template type parameter among the children; -1 when
// there is none or its size is unknown.
int64_t first_type_parameter_size(Dwarf_Die* die) {
  Dwarf_Die child;
  if (dwarf_child(die, &child) != 0) return -1;
  do {
    if (dwarf_tag(&child) == DW_TAG_template_type_parameter) {
      uint64_t size = referenced_byte_size(&child);
      return size ? static_cast<int64_t>(size) : -1;
    }
  } while (dwarf_siblingof(&child, &child) == 0);
  return -1;
}

// For a member function: the class `this` points to, from the first artificial
// parameter. 0 when the function has no such parameter.
bool this_class(Dwarf_Die* function, Dwarf_Die* out) {
  Dwarf_Die child;
  if (dwarf_child(function, &child) != 0) return false;
  do {
    if (dwarf_tag(&child) != DW_TAG_formal_parameter || !dwarf_hasattr(&child, DW_AT_artificial)) continue;
    Dwarf_Die pointer;
    if (!follow(&child, DW_AT_type, &pointer)) return false;
    for (int hop = 0; hop < kMaxTypeHops; ++hop) {
      int tag = dwarf_tag(&pointer);
      if (tag != DW_TAG_const_type && tag != DW_TAG_pointer_type) return false;
      Dwarf_Die next;
      if (!follow(&pointer, DW_AT_type, &next)) return false;
      pointer = next;
      tag = dwarf_tag(&pointer);
      if (tag == DW_TAG_class_type || tag == DW_TAG_structure_type) {
        *out = pointer;
        return true;
      }
    }
    return false;
  } while (dwarf_siblingof(&child, &child) == 0);
  return false;
}

bool is_sized_frame(const std::string& name) {
  for (const char* key : kSizedFrames)
    if (name.find(key) != std::string::npos) return true;
  return false;
}

std::string directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

std::string real_path(const char* path) {
  char* real = realpath(path, nullptr);
  if (real == nullptr) return path;
  std::string out(real);
  std::free(real);
  return out;
}

// libdwfl's find_debuginfo callback: by build id under the debug roots, then by
// .gnu_debuglink beside the file, in its .debug/ folder, and under each root.
// Unlike dwfl_standard_find_debuginfo it never asks a debuginfod server: a
// report must not download debug info unasked.
int find_debuginfo_locally(Dwfl_Module* module, void** userdata, const char* module_name, Dwarf_Addr base,
                           const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                           char** debuginfo_file_name) {
  int fd = dwfl_build_id_find_debuginfo(module, userdata, module_name, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
  if (fd >= 0 || debuglink_file == nullptr || file_name == nullptr) return fd;
  std::string itself = real_path(file_name);
  std::string directory = directory_of(itself);
  std::vector<std::string> candidates = {directory + "/" + debuglink_file,
                                         directory + "/.debug/" + debuglink_file};
  if (t_debug_roots != nullptr)
    for (const std::string& root : *t_debug_roots) candidates.push_back(root + directory + "/" + debuglink_file);
  for (const std::string& candidate : candidates) {
    if (real_path(candidate.c_str()) == itself) continue;
    fd = open(candidate.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      *debuginfo_file_name = strdup(candidate.c_str());
      return fd;
    }
  }
  return -1;
}

}  // namespace

std::string normalize_path(const std::string& path) {
  if (path.empty()) return path;
  bool absolute = path[0] == '/';
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(begin, end - begin);
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..")
        parts.pop_back();
      else if (!absolute)
        parts.push_back(part);
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    begin = end + 1;
  }
  std::string out = absolute ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "/" : "") + parts[i];
  return out.empty() ? "." : out;
}

DwarfLookup::DwarfLookup(const std::string& path, const std::vector<std::string>& debug_roots)
    : path_(path), debug_roots_(debug_roots) {
  for (const std::string& root : debug_roots_) debuginfo_path_ += (debuginfo_path_.empty() ? "" : ":") + root;
  debuginfo_path_pointer_ = &debuginfo_path_[0];
  callbacks_.find_elf = dwfl_build_id_find_elf;
  callbacks_.find_debuginfo = find_debuginfo_locally;
  callbacks_.section_address = dwfl_offline_section_address;
  callbacks_.debuginfo_path = &debuginfo_path_pointer_;
  dwfl_ = dwfl_begin(&callbacks_);
  if (dwfl_ == nullptr) return;
  dwfl_report_begin(dwfl_);
  // At base 0: module addresses are the link-time addresses of the file.
  Dwfl_Module* module = dwfl_report_elf(dwfl_, path.c_str(), path.c_str(), -1, 0, false);
  dwfl_report_end(dwfl_, nullptr, nullptr);
  if (module == nullptr) return;
  t_debug_roots = &debug_roots_;
  dwarf_ = dwfl_module_getdwarf(module, &bias_);
  t_debug_roots = nullptr;
  if (dwarf_ == nullptr) return;
  const char* debug_file = nullptr;
  dwfl_module_info(module, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &debug_file);
  debug_file_ = debug_file != nullptr ? debug_file : path;
  read_units();
}

DwarfLookup::~DwarfLookup() {
  if (dwfl_ != nullptr) dwfl_end(dwfl_);
}

void DwarfLookup::read_units() {
  Dwarf_CU* cu = nullptr;
  Dwarf_Half version = 0;
  uint8_t unit_type = 0;
  Dwarf_Die cudie, subdie;
  while (dwarf_get_units(dwarf_, cu, &cu, &version, &unit_type, &cudie, &subdie) == 0) {
    if (unit_type != DW_UT_compile && unit_type != DW_UT_partial) continue;
    Unit unit;
    unit.die_offset = dwarf_dieoffset(&cudie);
    Dwarf_Word language = 0;
    unit.scoped = !(unsigned_attribute(&cudie, DW_AT_language, &language) && is_flat_language(language));
    if (const char* dir = string_attribute(&cudie, DW_AT_comp_dir)) unit.comp_dir = dir;
    size_t index = units_.size();
    Dwarf_Addr base, low, high;
    for (ptrdiff_t at = 0; (at = dwarf_ranges(&cudie, at, &base, &low, &high)) > 0;)
      if (low != 0 && high > low) unit_ranges_.push_back(UnitRange{low, high, index});
    unit_by_die_[unit.die_offset] = index;
    units_.push_back(std::move(unit));
  }
  std::sort(unit_ranges_.begin(), unit_ranges_.end(),
            [](const UnitRange& a, const UnitRange& b) { return a.low < b.low; });
  uint64_t reach = 0;
  for (const UnitRange& range : unit_ranges_) unit_reach_.push_back(reach = std::max(reach, range.high));
}

DwarfLookup::Unit* DwarfLookup::unit_at(uint64_t pc) {
  auto it = std::upper_bound(unit_ranges_.begin(), unit_ranges_.end(), pc,
                             [](uint64_t value, const UnitRange& range) { return value < range.low; });
  for (size_t i = static_cast<size_t>(it - unit_ranges_.begin()); i-- > 0 && unit_reach_[i] > pc;)
    if (pc < unit_ranges_[i].high) return &units_[unit_ranges_[i].unit];
  Dwarf_Die cudie;  // not in any unit's own ranges: ask .debug_aranges
  if (dwarf_addrdie(dwarf_, pc, &cudie) == nullptr) return nullptr;
  return unit_of_die(&cudie);
}

DwarfLookup::Unit* DwarfLookup::unit_of_die(Dwarf_Die* die) {
  Dwarf_Die cudie;
  if (dwarf_diecu(die, &cudie, nullptr, nullptr) == nullptr) return nullptr;
  auto found = unit_by_die_.find(dwarf_dieoffset(&cudie));
  return found == unit_by_die_.end() ? nullptr : &units_[found->second];
}

void DwarfLookup::index_unit(Unit& unit) {
  unit.indexed = true;
  ++units_indexed_;
  Dwarf_Die cudie;
  if (dwarf_offdie(dwarf_, unit.die_offset, &cudie) == nullptr) return;
  collect_functions(&cudie, 0, unit);
  std::sort(unit.functions.begin(), unit.functions.end(),
            [](const FunctionRange& a, const FunctionRange& b) { return a.low < b.low; });
  uint64_t reach = 0;
  for (const FunctionRange& f : unit.functions) unit.reach.push_back(reach = std::max(reach, f.high));
}

// Functions with code, in the unit and in its namespaces and classes (GCC puts
// a member function's code at the top level, Clang sometimes in its scope).
void DwarfLookup::collect_functions(Dwarf_Die* parent, Dwarf_Off parent_offset, Unit& unit) {
  Dwarf_Die child;
  if (dwarf_child(parent, &child) != 0) return;
  do {
    int tag = dwarf_tag(&child);
    if (tag == DW_TAG_subprogram) {
      if (parent_offset && unit.scoped) parents_[dwarf_dieoffset(&child)] = parent_offset;
      if (!dwarf_hasattr(&child, DW_AT_low_pc) && !dwarf_hasattr(&child, DW_AT_ranges)) continue;
      Dwarf_Addr base, low, high;
      for (ptrdiff_t at = 0; (at = dwarf_ranges(&child, at, &base, &low, &high)) > 0;)
        if (low != 0 && high > low) unit.functions.push_back(FunctionRange{low, high, dwarf_dieoffset(&child)});
      Dwarf_Die origin;
      Dwarf_Addr entry = 0;
      if (follow(&child, DW_AT_abstract_origin, &origin) && dwarf_lowpc(&child, &entry) == 0 && entry != 0)
        out_of_line_starts_.emplace(dwarf_dieoffset(&origin), entry);
    } else if (is_container(tag)) {
      Dwarf_Off offset = dwarf_dieoffset(&child);
      if (parent_offset && unit.scoped) parents_[offset] = parent_offset;
      collect_functions(&child, offset, unit);
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

bool DwarfLookup::function_at(const Unit& unit, uint64_t pc, Dwarf_Die* out) {
  const auto& functions = unit.functions;
  auto it = std::upper_bound(functions.begin(), functions.end(), pc,
                             [](uint64_t value, const FunctionRange& f) { return value < f.low; });
  for (size_t i = static_cast<size_t>(it - functions.begin()); i-- > 0 && unit.reach[i] > pc;)
    if (pc < functions[i].high) return dwarf_offdie(dwarf_, functions[i].die, out) != nullptr;
  return false;
}

const DwarfLookup::FunctionScopes& DwarfLookup::scopes_of(Dwarf_Die function) {
  Dwarf_Off offset = dwarf_dieoffset(&function);
  auto found = function_scopes_.find(offset);
  if (found != function_scopes_.end()) return found->second;
  FunctionScopes& scopes = function_scopes_[offset];
  scopes.push_back(Scope{function, true, {}, {}});
  for (std::vector<uint32_t> pending{0}; !pending.empty();) {  // iterative: inlining nests deeply
    uint32_t parent = pending.back();
    pending.pop_back();
    Dwarf_Die parent_die = scopes[parent].die, child;
    if (dwarf_child(&parent_die, &child) != 0) continue;
    do {
      int tag = dwarf_tag(&child);
      if (!is_code_scope(tag)) continue;
      Scope scope{child, tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram, {}, {}};
      Dwarf_Addr base, low, high;
      for (ptrdiff_t at = 0; (at = dwarf_ranges(&child, at, &base, &low, &high)) > 0;)
        scope.ranges.emplace_back(low, high);
      auto index = static_cast<uint32_t>(scopes.size());
      scopes.push_back(std::move(scope));
      scopes[parent].children.push_back(index);
      pending.push_back(index);
    } while (dwarf_siblingof(&child, &child) == 0);
  }
  return scopes;
}

// The function, then each inlined subroutine (or nested function) holding pc:
// at each level the first code scope that holds pc, as addr2line descends.
std::vector<Dwarf_Die> DwarfLookup::scopes_at(Dwarf_Die function, uint64_t pc) {
  const FunctionScopes& scopes = scopes_of(function);
  std::vector<Dwarf_Die> out{function};
  for (uint32_t current = 0;;) {
    const Scope* inner = nullptr;
    for (uint32_t child : scopes[current].children) {
      for (const auto& range : scopes[child].ranges)
        if (range.first <= pc && pc < range.second) inner = &scopes[child];
      if (inner != nullptr) {
        current = child;
        break;
      }
    }
    if (inner == nullptr) return out;
    if (inner->frame) out.push_back(inner->die);
  }
}

std::vector<RawFrame> DwarfLookup::frames_at(uint64_t module_pc) {
  if (dwarf_ == nullptr) return {};
  uint64_t pc = module_pc - bias_;
  Unit* unit = unit_at(pc);
  if (unit == nullptr) return {};
  if (!unit->indexed) index_unit(*unit);
  Dwarf_Die function;
  if (!function_at(*unit, pc, &function)) return {};
  std::vector<Dwarf_Die> scopes = scopes_at(function, pc);

  std::vector<RawFrame> frames(scopes.size());
  for (size_t i = 0; i < scopes.size(); ++i) {
    RawFrame& frame = frames[i];
    frame.name = name_of(&scopes[i], *unit);
    if (i + 1 < scopes.size()) {  // where this frame inlined the next
      Dwarf_Word line = 0;
      frame.file = call_file(*unit, &scopes[i + 1]);
      if (unsigned_attribute(&scopes[i + 1], DW_AT_call_line, &line)) frame.line = static_cast<uint32_t>(line);
    }
    if (dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine && is_sized_frame(frame.name))
      frame.type_argument_size = type_argument_size(&scopes[i]);
    Dwarf_Die origin;
    if (i > 0 && frame.name.compare(0, 2, "_Z") != 0 && follow(&scopes[i], DW_AT_abstract_origin, &origin)) {
      auto copy = out_of_line_starts_.find(dwarf_dieoffset(&origin));
      if (copy != out_of_line_starts_.end()) frame.out_of_line_start = copy->second + bias_;
    }
  }
  Dwarf_Die cudie;
  if (dwarf_offdie(dwarf_, unit->die_offset, &cudie) != nullptr) {
    if (Dwarf_Line* line = dwarf_getsrc_die(&cudie, pc)) {
      int number = 0;
      dwarf_lineno(line, &number);
      frames.back().file = line_file(*unit, dwarf_linesrc(line, nullptr, nullptr));
      frames.back().line = static_cast<uint32_t>(number);
    }
  }
  return frames;
}

std::string DwarfLookup::line_file(const Unit& unit, const char* raw) {
  if (raw == nullptr) return "";
  auto found = file_names_.find(raw);
  if (found != file_names_.end()) return found->second;
  std::string name = raw;
  if (name[0] != '/' && !unit.comp_dir.empty()) name = unit.comp_dir + "/" + name;
  return file_names_[raw] = normalize_path(name);
}

std::string DwarfLookup::call_file(Unit& unit, Dwarf_Die* inlined) {
  Dwarf_Word index = 0;
  if (!unsigned_attribute(inlined, DW_AT_call_file, &index)) return "";
  Dwarf_Die cudie;
  Dwarf_Files* files = nullptr;
  size_t count = 0;
  if (dwarf_offdie(dwarf_, unit.die_offset, &cudie) == nullptr || dwarf_getsrcfiles(&cudie, &files, &count) != 0 ||
      index >= count)
    return "";
  return line_file(unit, dwarf_filesrc(files, index, nullptr, nullptr));
}

// The linkage name found along the DIE's origins, else its source name.
std::string DwarfLookup::name_of(Dwarf_Die* die, const Unit& unit) {
  Dwarf_Off offset = dwarf_dieoffset(die);
  auto cached = names_.find(offset);
  if (cached != names_.end()) return cached->second;
  std::string name, source_name;
  Dwarf_Die source_die{};
  for (const Dwarf_Die& origin : origin_chain(die)) {
    Dwarf_Die current = origin;
    const char* linkage = string_attribute(&current, DW_AT_linkage_name);
    if (linkage == nullptr) linkage = string_attribute(&current, DW_AT_MIPS_linkage_name);
    if (linkage != nullptr && *linkage) {
      name = linkage;
      break;
    }
    const char* plain = string_attribute(&current, DW_AT_name);
    if (source_name.empty() && plain != nullptr && *plain) {
      source_name = plain;
      source_die = current;
    }
  }
  if (name.empty()) {
    if (source_name.empty()) {
      name = "<unknown function>";
    } else if (unit.scoped) {
      if (Unit* owner = unit_of_die(&source_die))  // its scopes are known once its unit is indexed
        if (!owner->indexed) index_unit(*owner);
      name = parents_.count(dwarf_dieoffset(&source_die)) ? qualified(dwarf_dieoffset(&source_die), source_name)
                                                          : qualified_in_body(&source_die, source_name);
    } else {
      name = source_name;
    }
  }
  return names_[offset] = name;
}

std::string DwarfLookup::qualified(Dwarf_Off die, const std::string& name) {
  std::string out = name;
  for (auto parent = parents_.find(die); parent != parents_.end(); parent = parents_.find(parent->second)) {
    Dwarf_Die scope;
    if (dwarf_offdie(dwarf_, parent->second, &scope) == nullptr || !is_name_scope(dwarf_tag(&scope))) break;
    const char* scope_name = string_attribute(&scope, DW_AT_name);
    out = std::string(scope_name != nullptr ? scope_name : "(anonymous namespace)") + "::" + out;
  }
  return out;
}

// The DIEs that enclose `target`, outermost first (its unit's DIE left out): found by
// going down from the unit's DIE into the child whose subtree holds the offset.
bool DwarfLookup::enclosing_dies(Dwarf_Die* target, std::vector<Dwarf_Die>* out) {
  Dwarf_Die at;
  if (dwarf_diecu(target, &at, nullptr, nullptr) == nullptr) return false;
  const Dwarf_Off want = dwarf_dieoffset(target);
  for (int depth = 0; depth < kMaxScopeDepth; ++depth) {
    Dwarf_Die child, next;
    if (dwarf_child(&at, &child) != 0) return false;
    while (dwarf_dieoffset(&child) != want) {
      if (dwarf_siblingof(&child, &next) != 0 || dwarf_dieoffset(&next) > want) break;
      child = next;
    }
    if (dwarf_dieoffset(&child) == want) return true;
    if (dwarf_dieoffset(&child) > want) return false;
    out->push_back(child);
    at = child;
  }
  return false;
}

// A name declared inside a function's body, which the scope index (namespaces and
// classes only) does not hold: a lambda's operator(), in its closure type, in the function
// that wrote the lambda. GCC gives no linkage name to an operator() it only inlined, and
// "operator()" alone says nothing: the enclosing function's name (its linkage name,
// demangled) and the classes between it and the name qualify it, as
// `run()::<lambda(int)>::operator()` (Clang leaves the closure type unnamed: `(lambda)`).
std::string DwarfLookup::qualified_in_body(Dwarf_Die* die, const std::string& name) {
  std::vector<Dwarf_Die> enclosing;
  if (!enclosing_dies(die, &enclosing)) return name;
  std::string out;
  for (Dwarf_Die& scope : enclosing) {
    int tag = dwarf_tag(&scope);
    const char* scope_name = string_attribute(&scope, DW_AT_name);
    if (tag == DW_TAG_subprogram) {
      Unit* owner = unit_of_die(&scope);
      if (owner == nullptr) return name;
      std::string function = name_of(&scope, *owner);
      out = function.compare(0, 2, "_Z") == 0 ? core::demangle(function) : function;
    } else if (tag == DW_TAG_namespace) {
      out += std::string(out.empty() ? "" : "::") + (scope_name != nullptr ? scope_name : "(anonymous namespace)");
    } else if (is_name_scope(tag)) {
      out += std::string(out.empty() ? "" : "::") + (scope_name != nullptr ? scope_name : "(lambda)");
    }  // lexical blocks name nothing
  }
  return out.empty() ? name : out + "::" + name;
}

// sizeof the first template type argument of a function, else of its class.
uint64_t DwarfLookup::type_argument_size(Dwarf_Die* die) {
  Dwarf_Off offset = dwarf_dieoffset(die);
  auto cached = type_argument_sizes_.find(offset);
  if (cached != type_argument_sizes_.end()) return cached->second;
  return type_argument_sizes_[offset] = find_type_argument_size(die);
}

uint64_t DwarfLookup::find_type_argument_size(Dwarf_Die* die) {
  std::vector<Dwarf_Die> origins = origin_chain(die);
  for (Dwarf_Die& origin : origins) {
    int64_t size = first_type_parameter_size(&origin);
    if (size > 0) return static_cast<uint64_t>(size);
  }
  // A member function: its class is the type `this` points to.
  for (Dwarf_Die& origin : origins) {
    Dwarf_Die klass;
    if (this_class(&origin, &klass)) return static_cast<uint64_t>(std::max<int64_t>(0, first_type_parameter_size(&klass)));
  }
  return enclosing_class_argument_size(&origins.back());
}

// A member function declared in a class template (static members have no `this`).
uint64_t DwarfLookup::enclosing_class_argument_size(Dwarf_Die* declaration) {
  if (Unit* owner = unit_of_die(declaration))
    if (!owner->indexed) index_unit(*owner);
  auto parent = parents_.find(dwarf_dieoffset(declaration));
  Dwarf_Die klass;
  if (parent == parents_.end() || dwarf_offdie(dwarf_, parent->second, &klass) == nullptr) return 0;
  int tag = dwarf_tag(&klass);
  if (tag != DW_TAG_class_type && tag != DW_TAG_structure_type && tag != DW_TAG_union_type) return 0;
  return static_cast<uint64_t>(std::max<int64_t>(0, first_type_parameter_size(&klass)));
}

}  // namespace symbolize
}  // namespace heaptype
