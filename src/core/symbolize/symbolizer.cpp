#include "symbolizer.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unordered_set>
#include <utility>

#include "module_symbols.hpp"

namespace heaptype {
namespace symbolize {
namespace {

class Stopwatch {
 public:
  explicit Stopwatch(double& total) : total_(total), started_(std::chrono::steady_clock::now()) {}
  ~Stopwatch() { total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count(); }

 private:
  double& total_;
  std::chrono::steady_clock::time_point started_;
};

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string megabytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

}  // namespace

struct Symbolizer::Shared {
  ModuleSettings settings;
  ModuleCounters counters;
};

// Where one module file was loaded in this process: the files' own knowledge
// (symbols) is at link-time addresses and may be shared with other processes'.
struct Symbolizer::Loaded {
  MappedFile file;
  std::shared_ptr<ModuleSymbols> symbols;
  bool placed = false, readable = false;  // bias known (once placed)
  uint64_t bias = 0;                      // runtime address - link-time address
  std::string error;                      // why it is not readable
  const TagMap* tags = nullptr;           // link-time tags, once asked for (a profile asks per tag)
  uint64_t low() const { return file.low; }
  uint64_t high() const { return file.high; }
};

Symbolizer::Symbolizer(std::vector<Mapping> modules, std::string executable, Options options)
    : executable_(std::move(executable)), options_(std::move(options)), shared_(std::make_shared<Shared>()) {
  shared_->settings.cache_dir = resolve_cache_dir(options_.cache_dir);
  shared_->settings.debug_roots = options_.debug_roots;
  add_modules(modules, nullptr);
}

Symbolizer::Symbolizer(std::vector<Mapping> modules, const Symbolizer& earlier)
    : executable_(earlier.executable_), options_(earlier.options_), shared_(earlier.shared_) {
  add_modules(modules, &earlier);
}

// One Loaded per file, sorted by address; a file `earlier` knows keeps its symbols.
void Symbolizer::add_modules(const std::vector<Mapping>& modules, const Symbolizer* earlier) {
  std::unordered_map<std::string, std::shared_ptr<ModuleSymbols>> known;
  if (earlier != nullptr)
    for (const auto& m : earlier->modules_) known.emplace(m->file.path, m->symbols);
  for (MappedFile& file : group_by_file(modules)) {
    auto loaded = std::make_unique<Loaded>();
    auto found = known.find(file.path);
    loaded->symbols = found != known.end() ? found->second
                                           : std::make_shared<ModuleSymbols>(file.path, shared_->settings,
                                                                             shared_->counters);
    loaded->file = std::move(file);
    modules_.push_back(std::move(loaded));
  }
}

Symbolizer::~Symbolizer() {
  try {
    end_lazy_progress();
    save_cache();
  } catch (...) {  // a destructor must not throw; the cache is an optimisation
  }
}

Symbolizer::Loaded* Symbolizer::module_at(uint64_t address, bool with_image_tail) {
  auto it = std::upper_bound(modules_.begin(), modules_.end(), address,
                             [](uint64_t a, const std::unique_ptr<Loaded>& m) { return a < m->low(); });
  if (it == modules_.begin()) return nullptr;
  Loaded* module = std::prev(it)->get();
  bool inside = with_image_tail ? image_contains(*module, address) : address < module->high();
  return inside ? module : nullptr;
}

// Opens the file (once for every process sharing it) and finds where this
// process loaded it. False when the file cannot be read, is not ELF, or its
// segments do not fit the mappings; module.error says why.
bool Symbolizer::place(Loaded& module) {
  if (module.placed) return module.readable;
  module.placed = true;
  if (!module.symbols->open()) {
    module.error = module.symbols->error();
    return false;
  }
  try {
    module.bias = load_bias(module.symbols->segments(), module.file.mappings);
  } catch (const SymbolError& e) {
    module.error = e.what();
    return false;
  }
  module.readable = true;
  return true;
}

// The module's image goes past its file-backed mappings: the tail of .bss is
// anonymous memory (tags live there).
bool Symbolizer::image_contains(Loaded& module, uint64_t address) {
  if (module.low() <= address && address < module.high()) return true;
  if (address < module.low() || !place(module)) return false;
  uint64_t image_end = 0;
  for (const Segment& s : module.symbols->segments()) image_end = std::max(image_end, s.vaddr + s.memsz);
  return address < module.bias + image_end;
}

void Symbolizer::touch(Loaded& module) {
  if (touched_.insert(module.symbols.get()).second && !module.symbols->cache_file().empty())
    stats_.cache_files.push_back(module.symbols->cache_file());
}

bool Symbolizer::open(Loaded& module) {
  if (place(module)) {
    touch(module);
    return true;
  }
  if (warned_.insert(module.symbols.get()).second)
    warn(module.error + ": its addresses are shown as " + base_name(module.file.path) + "+offset");
  return false;
}

void Symbolizer::warn(const std::string& message) { warnings_.push_back(message); }

Location Symbolizer::locate(uint64_t address, Kind kind) {
  Location location;
  location.address = address;
  Loaded* module = module_at(address, false);
  if (module == nullptr) return location;
  location.module = module->file.path;
  if (!open(*module)) {
    location.module_offset = address - module->low();
    return location;
  }
  ModuleSymbols& symbols = *module->symbols;
  location.module_offset = address - module->bias;
  uint64_t pc = location.module_offset - (kind == Kind::kCallSite ? 1 : 0);
  CodeInfo info = symbols.code_info(pc, options_.lines);
  if (kind == Kind::kFunction && symbols.lacks_debug_info() && warned_.insert(&symbols).second)
    warn(symbols.path() + " has no debug info: its functions come without source lines or inlined frames "
                          "(compile with -g)");
  location.function_address = info.has_start ? info.start + module->bias : 0;
  if (!info.found) return location;
  location.function = std::move(info.function);
  location.frames = std::move(info.frames);
  location.coroutine = info.coroutine;
  return location;
}

const Location& Symbolizer::lookup(uint64_t address, Kind kind) {
  auto& table = kind == Kind::kFunction ? functions_ : call_sites_;
  auto found = table.find(address);
  if (found != table.end()) return found->second;
  Stopwatch watch(stats_.seconds);
  size_t decoded = shared_->counters.decoded;
  ++stats_.addresses;
  Location location = locate(address, kind);
  if (shared_->counters.decoded > decoded) note_decoded();
  return table.emplace(address, std::move(location)).first->second;
}

const Location& Symbolizer::function_at(uint64_t entry_address) { return lookup(entry_address, Kind::kFunction); }
const Location& Symbolizer::call_site(uint64_t return_address) { return lookup(return_address, Kind::kCallSite); }

void Symbolizer::prefetch_functions(const std::vector<uint64_t>& addresses) { prefetch(addresses, Kind::kFunction); }
void Symbolizer::prefetch_call_sites(const std::vector<uint64_t>& addresses) { prefetch(addresses, Kind::kCallSite); }

// Address order groups each module's addresses together, and within a module
// keeps neighbouring code (one compilation unit) together.
void Symbolizer::prefetch(const std::vector<uint64_t>& addresses, Kind kind) {
  end_lazy_progress();
  auto& table = kind == Kind::kFunction ? functions_ : call_sites_;
  std::vector<uint64_t> wanted;
  for (uint64_t a : addresses)
    if (table.find(a) == table.end()) wanted.push_back(a);
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  // Progress counts the time earlier calls spent: a symbolization split into
  // calls (functions, then call sites) reports once it has taken a second.
  const double earlier = stats_.seconds;
  Stopwatch watch(stats_.seconds);
  std::vector<Loaded*> owners;
  owners.reserve(wanted.size());
  for (uint64_t a : wanted) owners.push_back(module_at(a, false));
  std::unique_ptr<ProgressTask> task = batch_progress(owners, earlier);
  for (size_t i = 0; i < wanted.size(); ++i) {
    table.emplace(wanted[i], locate(wanted[i], kind));
    ++stats_.addresses;
    if (task) task->update(static_cast<double>(i + 1) / static_cast<double>(wanted.size()));
  }
}

// One task per batch, named after the module holding most of its addresses.
std::unique_ptr<ProgressTask> Symbolizer::batch_progress(const std::vector<Loaded*>& owners, double earlier) {
  std::unordered_map<Loaded*, size_t> counts;
  Loaded* main = nullptr;
  for (Loaded* m : owners)
    if (m != nullptr && ++counts[m] > (main ? counts[main] : 0)) main = m;
  if (!options_.progress || main == nullptr) return nullptr;
  std::string what = options_.lines ? "reading debug info of " : "reading symbols of ";
  return std::make_unique<ProgressTask>(
      options_.progress, what + base_name(main->file.path) + " (" + megabytes(main->symbols->file_size()) + ")",
      options_.progress_delay, earlier);
}

void Symbolizer::note_decoded() {
  if (!options_.progress) return;
  if (!lazy_progress_) {
    lazy_progress_ = std::make_unique<ProgressTask>(options_.progress, "symbolizing addresses",
                                                    options_.progress_delay, stats_.seconds);
    lazily_decoded_ = 0;
  }
  lazy_progress_->update(-1, std::to_string(++lazily_decoded_) + " looked up");
}

void Symbolizer::end_lazy_progress() { lazy_progress_.reset(); }

std::string Symbolizer::map_file_for(const std::string& path) const {
  auto given = [this](const std::string& key) -> std::string {
    auto found = options_.map_files.find(key);
    return found == options_.map_files.end() ? "" : found->second;
  };
  std::string map = given(path);
  if (map.empty()) map = given(base_name(path));
  if (map.empty() && path == executable_) map = given("");
  if (map.empty() && is_regular_file(path + ".map")) map = path + ".map";
  return map;
}

std::unordered_map<uint64_t, std::string> Symbolizer::type_names(const std::vector<uint64_t>& tags) {
  end_lazy_progress();
  const double earlier = stats_.seconds;
  Stopwatch watch(stats_.seconds);
  std::unordered_map<uint64_t, std::string> names;
  std::unique_ptr<ProgressTask> task;
  if (options_.progress)
    task = std::make_unique<ProgressTask>(options_.progress, "reading type names", options_.progress_delay, earlier);
  for (size_t i = 0; i < tags.size(); ++i) {
    uint64_t tag = tags[i];
    std::string& name = names[tag];
    Loaded* module = module_at(tag, true);
    const TagMap* module_tags = module ? tags_of(*module) : nullptr;
    if (module_tags) {
      auto found = module_tags->find(tag - module->bias);
      if (found != module_tags->end()) name = found->second;
    }
    if (task) task->update(static_cast<double>(i + 1) / static_cast<double>(tags.size()));
  }
  return names;
}

const std::string& Symbolizer::type_name(uint64_t tag) {
  static const std::string kUnknown;
  Loaded* module = module_at(tag, true);
  if (module == nullptr) return kUnknown;
  const TagMap* module_tags = module->tags;
  if (module_tags == nullptr) {  // the module's first tag: its tables are read now
    end_lazy_progress();
    Stopwatch watch(stats_.seconds);
    module_tags = tags_of(*module);
    if (module_tags == nullptr) return kUnknown;
  }
  auto found = module_tags->find(tag - module->bias);
  return found == module_tags->end() ? kUnknown : found->second;
}

// The module's tag table, read with its first tag (the map file is looked for once per
// module: a test binary has a thousand tags); nullptr for a file that is not ELF (data,
// fonts: no tags). Throws SymbolError when the module cannot be read.
const TagMap* Symbolizer::tags_of(Loaded& module) {
  if (module.tags) return module.tags;
  const TagMap& link = module.symbols->link_tags(map_file_for(module.file.path));
  if (!place(module)) {
    if (module.symbols->not_elf()) return nullptr;
    throw SymbolError(module.error);
  }
  touch(module);
  module.tags = &link;
  return module.tags;
}

Stats Symbolizer::stats() const {
  Stats out = stats_;
  const ModuleCounters& c = shared_->counters;
  out.from_cache = c.from_cache;
  out.decoded = c.decoded;
  out.dwarf_opened = c.dwarf_opened;
  out.symbol_tables_read = c.symbol_tables_read;
  out.type_tables_read = c.type_tables_read;
  out.type_tables_from_cache = c.type_tables_from_cache;
  out.modules = touched_.size();
  for (const auto& module : modules_) out.units += module->symbols->units_indexed();
  return out;
}

void Symbolizer::save_cache() {
  for (const auto& module : modules_) module->symbols->save_cache();
}

}  // namespace symbolize
}  // namespace heaptype
