#include "module_symbols.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "../demangle.hpp"
#include "errors.hpp"

namespace heaptype {
namespace symbolize {
namespace {

// "f [clone .cold]" is the part of f that GCC moved away from the hot path.
std::string strip_cold(std::string name) {
  for (const std::string suffix : {" [clone .cold]", ".cold"}) {
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      name.resize(name.size() - suffix.size());
      break;
    }
  }
  return name;
}

}  // namespace

ModuleSymbols::ModuleSymbols(std::string path, const ModuleSettings& settings, ModuleCounters& counters)
    : path_(std::move(path)), settings_(settings), counters_(counters) {}

bool ModuleSymbols::open() {
  if (opened_) return readable_;
  opened_ = true;
  try {
    elf_ = std::make_unique<ElfFile>(path_);
    segments_ = elf_->load_segments();
  } catch (const NotElfError& e) {
    not_elf_ = true;
    error_ = e.what();
    return false;
  } catch (const SymbolError& e) {
    error_ = e.what();
    return false;
  }
  readable_ = true;
  if (!settings_.cache_dir.empty()) {
    // A stripped file and its unstripped twin (a debug package, a rebuild that keeps
    // the symbol table) share a build id but not what can be learnt from them.
    std::string key = cache_key(elf_->build_id(), path_);
    if (!elf_->has_section(SHT_SYMTAB)) key += "-stripped";
    cache_file_ = cache_file_path(settings_.cache_dir, key);
    cached_.load(cache_file_);
  }
  return true;
}

uint64_t ModuleSymbols::file_size() const {
  struct stat st {};
  return stat(path_.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// An entry found without lines is decoded again when lines are wanted.
bool ModuleSymbols::find_cached(uint64_t pc, bool lines, CodeInfo* out) const {
  auto learnt = learnt_.entries.find(pc);
  if (learnt != learnt_.entries.end())
    *out = learnt->second;
  else if (!cached_.find(pc, out))
    return false;
  return !(lines && out->found && !out->with_lines);
}

CodeInfo ModuleSymbols::code_info(uint64_t pc, bool lines) {
  CodeInfo info;
  if (find_cached(pc, lines, &info)) {
    ++counters_.from_cache;
    return info;
  }
  ++counters_.decoded;
  dirty_ = true;
  info = decode(pc, lines);
  learnt_.entries[pc] = info;
  return info;
}

const std::string& ModuleSymbols::demangled(const char* name) {
  auto found = demangled_.find(name);
  if (found != demangled_.end()) return found->second;
  std::string text = name;
  return demangled_[name] = text.compare(0, 2, "_Z") == 0 ? core::demangle(text) : text;
}

// Whether the innermost function at pc, past a class's own `operator new` inlined
// into it (a promise type's), starts a C++20 coroutine: its allocation there is the
// coroutine's frame. `chain`: the DWARF frames, outermost first; the outermost is
// named by the symbol table when it has it.
bool ModuleSymbols::allocates_coroutine_frame(const std::vector<RawFrame>& chain, const char* symbol) {
  size_t depth = chain.size();
  while (depth > 1 && demangled(chain[depth - 1].name.c_str()).find("::operator new(") != std::string::npos) --depth;
  const char* name = depth > 1 || (symbol == nullptr && depth == 1) ? chain[depth - 1].name.c_str() : symbol;
  return name != nullptr && functions_->starts_coroutine(name);
}

// An inlined frame's function: DWARF's name, or, for a function DWARF names without a
// linkage name ("(anonymous namespace)::dup") that also has an out-of-line copy, the
// symbol table's name of that copy ("(anonymous namespace)::dup(char const*, unsigned
// int)"): calls inlined and calls out of line are one function (jsoncpp's
// duplicateAndPrefixStringValue was two rows). A compiler's clone (.constprop, .isra)
// keeps DWARF's name.
std::string ModuleSymbols::inlined_name(const RawFrame& raw) {
  if (raw.out_of_line_start) {
    FunctionTable::Symbol copy = functions_->find(raw.out_of_line_start);
    if (copy.name != nullptr && copy.start == raw.out_of_line_start && std::strchr(copy.name, '.') == nullptr)
      return demangled(copy.name);
  }
  return demangled(raw.name.c_str());
}

// The symbol table names the out-of-line function; DWARF adds the functions
// inlined at pc (innermost first) and the lines.
CodeInfo ModuleSymbols::decode(uint64_t pc, bool lines) {
  if (!functions_) {
    functions_ = std::make_unique<FunctionTable>(*elf_);
    ++counters_.symbol_tables_read;
  }
  std::vector<RawFrame> chain;  // outermost first
  if (lines) {
    if (!dwarf_) {
      dwarf_ = std::make_unique<DwarfLookup>(path_, settings_.debug_roots);
      counters_.dwarf_opened += dwarf_->has_dwarf();
      if (functions_->size() == 0 && dwarf_->has_dwarf() && dwarf_->debug_file() != path_) {
        try {  // a stripped module: its separate debug file keeps the symbol table
          debug_elf_ = std::make_unique<ElfFile>(dwarf_->debug_file());
          functions_ = std::make_unique<FunctionTable>(*debug_elf_);
        } catch (const SymbolError&) {
        }
      }
    }
    chain = dwarf_->frames_at(pc);
  }
  FunctionTable::Symbol symbol = functions_->find(pc);
  CodeInfo info;
  info.with_lines = lines;
  if (symbol.name == nullptr && chain.empty()) {
    // No name: the start of its function, from the call frame information, names it.
    if (!unwind_starts_) unwind_starts_ = std::make_unique<UnwindStarts>(*elf_);
    info.has_start = unwind_starts_->find(pc, &info.start);
    return info;
  }
  info.found = true;
  if (symbol.name != nullptr) {
    info.function = strip_cold(demangled(symbol.name));
    info.has_start = true;
    info.start = symbol.start;
  }
  for (size_t depth = 0; depth < chain.size(); ++depth) {
    const RawFrame& raw = chain[chain.size() - 1 - depth];
    bool outermost = depth + 1 == chain.size();
    Frame frame;
    // The symbol table names the out-of-line function as nm does.
    frame.function = outermost && symbol.name != nullptr ? info.function : inlined_name(raw);
    frame.file = raw.file;
    frame.line = raw.line;
    frame.inlined = !outermost;
    frame.type_argument_size = raw.type_argument_size;
    info.frames.push_back(std::move(frame));
  }
  if (info.frames.empty()) {  // no debug info: the function alone, without a line
    info.frames.emplace_back();
    info.frames.back().function = info.function;
  }
  if (symbol.name == nullptr) info.function = info.frames.back().function;
  info.coroutine = allocates_coroutine_frame(chain, symbol.name);
  return info;
}

const TagMap& ModuleSymbols::link_tags(const std::string& map_file) {
  if (has_link_tags_) return link_tags_;
  if (!open()) {
    if (!not_elf_) throw SymbolError(error_);
    has_link_tags_ = true;  // a mapped file that is not ELF (data, fonts) has no tags
    return link_tags_;
  }
  if (cached_.has_tags()) {
    ++counters_.type_tables_from_cache;
  } else {
    learnt_.tags = read_elf_type_tags(*elf_);
    learnt_.has_tags = dirty_ = true;
    ++counters_.type_tables_read;
  }
  const ElfTags& elf_tags = cached_.has_tags() ? cached_.tags() : learnt_.tags;
  if (elf_tags.has_symtab) {
    link_tags_ = elf_tags.tags;
  } else if (!map_file.empty()) {
    try {
      link_tags_ = map_file_type_tags(map_file);
    } catch (const SymbolError& e) {
      throw SymbolError("cannot read the linker map file of " + path_ + ": " + e.what());
    }
    for (const auto& tag : elf_tags.tags) link_tags_[tag.first] = tag.second;  // the symbols win
  } else if (!elf_tags.tags.empty() || !elf_tags.typeinfos.empty()) {
    // .dynsym alone: GCC exports its unique tag symbols, a shared library (libstdc++.so)
    // the typeinfos of its exceptions.
    link_tags_ = elf_tags.tags;
  } else {
    throw SymbolError(path_ + " is stripped and no linker map file was given: rebuild with -Wl,-Map=" +
                      base_name(path_) + ".map or keep the symbol table");
  }
  link_tags_.insert(elf_tags.typeinfos.begin(), elf_tags.typeinfos.end());  // never at a tag's address
  has_link_tags_ = true;
  return link_tags_;
}

void ModuleSymbols::save_cache() {
  if (!dirty_ || cache_file_.empty()) return;
  CacheContents contents = cached_.contents();
  CacheReader now;  // another process may have saved entries since this one opened the file
  if (now.load(cache_file_)) merge_cache_contents(contents, now.contents());
  for (auto& entry : learnt_.entries) contents.entries[entry.first] = entry.second;
  if (learnt_.has_tags) {
    contents.has_tags = true;
    contents.tags = learnt_.tags;
  }
  contents.binary = path_;
  write_cache_file(cache_file_, contents);
  dirty_ = false;
}

}  // namespace symbolize
}  // namespace heaptype
