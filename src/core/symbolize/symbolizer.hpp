// symbolizer.hpp: code addresses and type tags of one profiled process, named.
//
//   Symbolizer symbols(parse_module_map(profile.modules()), profile.executable(), Options());
//   const Location& f = symbols.function_at(entry);      // an -finstrument-functions entry address
//   const Location& s = symbols.call_site(return_address);
//   auto types = symbols.type_names(tags);               // tag address -> "std::vector<Foo>"
//
// Functions come from the ELF symbol tables (demangled, as `nm -C` names them),
// inlined frames and source lines from DWARF through elfutils' libdw (as
// `addr2line -i` shows them), type tags from the ELF symbols or the linker map
// file. What is learnt is cached on disk per binary (see symbol_cache.hpp), so
// a second report of the same build reads no DWARF. Another run of the same
// binaries (a test suite runs one test binary per test, each loaded at its own
// address) is named by a Symbolizer made with the constructor that takes an
// earlier one: it shares what was read of each file, in memory. Not thread-safe:
// use one Symbolizer (and the Symbolizers made from it) per thread.
#ifndef HEAPTYPE_CORE_SYMBOLIZE_SYMBOLIZER_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_SYMBOLIZER_HPP

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "errors.hpp"
#include "location.hpp"
#include "module_map.hpp"
#include "../progress.hpp"
#include "symbol_cache.hpp"

namespace heaptype {
namespace symbolize {

using core::ProgressEvent;
using core::ProgressFn;
using core::ProgressTask;
using core::stderr_progress;

class ModuleSymbols;

struct Options {
  // The on-disk cache: kDefaultCacheDir follows $HEAPTYPE_CACHE_DIR, else
  // $XDG_CACHE_HOME/heaptype, else ~/.cache/heaptype; "" turns it off.
  std::string cache_dir = kDefaultCacheDir;
  // Linker map files of stripped modules, by module path or base name; the key
  // "" stands for the executable. "<module>.map" beside a module is tried too.
  std::map<std::string, std::string> map_files;
  // false: names from the symbol tables only, no DWARF (no lines, no inlined frames).
  bool lines = true;
  // Where separate debug files are looked up: <root>/.build-id/xx/yyyy.debug and
  // <root><module's directory>/<.gnu_debuglink name>.
  std::vector<std::string> debug_roots = {"/usr/lib/debug"};
  // Progress of steps slower than progress_delay seconds; null for silence.
  ProgressFn progress = stderr_progress();
  double progress_delay = 1.0;
};

struct Stats {
  size_t addresses = 0;       // distinct addresses asked for (functions and call sites apart)
  size_t from_cache = 0;      // answered by the on-disk cache (or an earlier lookup of the same pc)
  size_t decoded = 0;         // looked up in the binaries
  size_t units = 0;           // DWARF compilation units indexed
  size_t modules = 0;         // modules holding some of the addresses, readable
  size_t dwarf_opened = 0;    // modules whose DWARF was opened (0 on a warm run)
  size_t symbol_tables_read = 0;  // function symbol tables read (0 on a warm run)
  size_t type_tables_read = 0;    // type-tag tables read from ELF symbols
  size_t type_tables_from_cache = 0;
  double seconds = 0;         // spent in lookups
  std::vector<std::string> cache_files;  // the cache files of the modules involved
};

class Symbolizer {
 public:
  // `modules`: the process's module map (parse_module_map); `executable`: the
  // profiled program's path (for the map_files key "").
  Symbolizer(std::vector<Mapping> modules, std::string executable, Options options = Options());
  // Another process of the same binaries: `modules` is its module map. What
  // `earlier` read of each file (symbol tables, DWARF, type tags, cache) is
  // shared, so only the addresses differ; its executable and options apply. The
  // files must not have changed since (the caller knows their identity).
  // Counters of Stats that count the files' work (symbol_tables_read,
  // type_tables_read, decoded, ...) are shared with `earlier`.
  Symbolizer(std::vector<Mapping> modules, const Symbolizer& earlier);
  ~Symbolizer();  // saves the cache
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // What a function entry address (as the -finstrument-functions hooks give
  // it) is. Cached per address: asking again costs a hash lookup. References
  // stay valid for the Symbolizer's lifetime.
  const Location& function_at(uint64_t entry_address);
  // What a return address is: looked up at return_address - 1, inside the call
  // instruction (the next instruction may belong to the next line or function).
  const Location& call_site(uint64_t return_address);
  // Batch versions: resolve many addresses at once, in address order per
  // module (faster than one by one), with progress for long batches.
  void prefetch_functions(const std::vector<uint64_t>& entry_addresses);
  void prefetch_call_sites(const std::vector<uint64_t>& return_addresses);

  // Type tag addresses -> type names ("" when an address is no tag). Throws
  // SymbolError naming the binary when a module holding some of the tags has no
  // symbol table with tags and no map file, or cannot be read.
  std::unordered_map<uint64_t, std::string> type_names(const std::vector<uint64_t>& tags);
  // One tag's name ("" when unknown), without copying it: the analysis asks tag by
  // tag, a thousand tags per profile of a test binary. The first tag of a module
  // reads its tables as type_names() does (and throws as it does).
  const std::string& type_name(uint64_t tag);

  // What went wrong without stopping the work: unreadable modules (their
  // addresses are named module+0xoffset), modules without debug info.
  std::vector<std::string> warnings() const { return warnings_; }
  Stats stats() const;

  // Writes what was learnt to the on-disk cache; the destructor does it too.
  void save_cache();

 private:
  enum class Kind { kFunction, kCallSite };
  struct Loaded;  // one module file of this process, where it was loaded
  void add_modules(const std::vector<Mapping>& modules, const Symbolizer* earlier);
  const Location& lookup(uint64_t address, Kind kind);
  void prefetch(const std::vector<uint64_t>& addresses, Kind kind);
  std::unique_ptr<ProgressTask> batch_progress(const std::vector<Loaded*>& owners, double earlier);
  Location locate(uint64_t address, Kind kind);
  Loaded* module_at(uint64_t address, bool with_image_tail);
  bool place(Loaded& module);
  bool open(Loaded& module);
  bool image_contains(Loaded& module, uint64_t address);
  void touch(Loaded& module);
  const TagMap* tags_of(Loaded& module);
  std::string map_file_for(const std::string& path) const;
  void note_decoded();
  void end_lazy_progress();
  void warn(const std::string& message);

  std::string executable_;
  Options options_;
  struct Shared;  // settings and counters of the files' work, shared with later Symbolizers
  std::shared_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Loaded>> modules_;  // sorted by low address
  std::unordered_map<uint64_t, Location> functions_, call_sites_;
  std::vector<std::string> warnings_;
  Stats stats_;
  std::unordered_set<const ModuleSymbols*> touched_;  // opened for some address
  std::unordered_set<const ModuleSymbols*> warned_;
  size_t lazily_decoded_ = 0;
  std::unique_ptr<ProgressTask> lazy_progress_;  // lookups one by one that add up
};

}  // namespace symbolize
}  // namespace heaptype

#endif
