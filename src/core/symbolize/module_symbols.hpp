// module_symbols.hpp: what the symbolizer knows about one module file, read
// lazily: its ELF header (build id, load segments) and cache file first, the
// symbol table and DWARF only when the cache cannot answer. Everything here is
// at link-time addresses, so the symbolizers of several runs of the same binary
// (each loaded at its own address) share one ModuleSymbols per file.
#ifndef HEAPTYPE_CORE_SYMBOLIZE_MODULE_SYMBOLS_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_MODULE_SYMBOLS_HPP

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "dwarf_lookup.hpp"
#include "elf_file.hpp"
#include "function_table.hpp"
#include "location.hpp"
#include "module_map.hpp"
#include "symbol_cache.hpp"
#include "type_tags.hpp"
#include "unwind_starts.hpp"

namespace heaptype {
namespace symbolize {

// Counters shared by a symbolizer's modules (see Stats in symbolizer.hpp).
struct ModuleCounters {
  size_t from_cache = 0, decoded = 0, dwarf_opened = 0, symbol_tables_read = 0;
  size_t type_tables_read = 0, type_tables_from_cache = 0;
};

struct ModuleSettings {
  std::string cache_dir;  // "" = no on-disk cache
  std::vector<std::string> debug_roots;
};

class ModuleSymbols {
 public:
  ModuleSymbols(std::string path, const ModuleSettings& settings, ModuleCounters& counters);

  const std::string& path() const { return path_; }

  // Reads the ELF header and the cache file, once. False when the file cannot
  // be read or is not ELF; error() then says why, naming the file.
  bool open();
  bool not_elf() const { return not_elf_; }
  const std::string& error() const { return error_; }
  // The file's PT_LOAD segments (link-time addresses). Requires open().
  const std::vector<Segment>& segments() const { return segments_; }
  const std::string& cache_file() const { return cache_file_; }

  // What link-time pc is; from the cache when it knows (with lines if asked),
  // else from the symbol table and (with lines) the DWARF. Requires open().
  CodeInfo code_info(uint64_t pc, bool lines);
  // The DWARF could not be found (known once some pc was decoded with lines).
  bool lacks_debug_info() const { return dwarf_ != nullptr && !dwarf_->has_dwarf(); }
  size_t units_indexed() const { return dwarf_ ? dwarf_->units_indexed() : 0; }
  // The size of the file, for progress messages.
  uint64_t file_size() const;

  // Tags at link-time addresses from the ELF symbols (cached), or from the map
  // file when the symbol table is gone, and the typeinfos of the ELF symbols (the
  // tags of thrown objects). Throws SymbolError like TypeResolver.
  const TagMap& link_tags(const std::string& map_file);

  // Writes what was learnt to the cache file (merged with what another process
  // may have written meanwhile). Nothing to do when nothing is new.
  void save_cache();

 private:
  CodeInfo decode(uint64_t pc, bool lines);
  bool allocates_coroutine_frame(const std::vector<RawFrame>& chain, const char* symbol);
  std::string inlined_name(const RawFrame& raw);
  bool find_cached(uint64_t pc, bool lines, CodeInfo* out) const;
  const std::string& demangled(const char* name);

  std::string path_;
  const ModuleSettings& settings_;
  ModuleCounters& counters_;
  bool opened_ = false, readable_ = false, not_elf_ = false;
  std::string error_;
  std::unique_ptr<ElfFile> elf_;
  std::vector<Segment> segments_;
  std::string cache_file_;
  CacheReader cached_;    // the cache file as it was when opened
  CacheContents learnt_;  // what this process added: entries decoded, the tag table
  bool dirty_ = false;
  std::unique_ptr<FunctionTable> functions_;
  std::unique_ptr<UnwindStarts> unwind_starts_;  // read when a pc has no symbol
  std::unique_ptr<ElfFile> debug_elf_;  // separate debug file, when its symbols name what the module's do not
  std::unique_ptr<DwarfLookup> dwarf_;
  std::unordered_map<std::string, std::string> demangled_;
  bool has_link_tags_ = false;
  TagMap link_tags_;
};

}  // namespace symbolize
}  // namespace heaptype

#endif
