#include "call_paths.hpp"

#include <algorithm>

#include "cxx_names.hpp"

namespace heaptype {
namespace core {
namespace {

uint64_t node_key(uint32_t thread, uint64_t node) { return (static_cast<uint64_t>(thread) << 40) ^ node; }

bool starts_with(const std::string& text, const char* prefix) {
  return text.compare(0, std::char_traits<char>::length(prefix), prefix) == 0;
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The C and C++ runtimes' own libraries: a walked stack passes through them
// before it reaches main or a thread's function.
bool is_runtime_module(const std::string& path) {
  std::string name = base_name(path);
  for (const char* prefix : {"libc.so", "libc-", "libpthread", "ld-linux", "ld-", "libstdc++", "libgcc_s", "libc++"})
    if (starts_with(name, prefix)) return true;
  return false;
}

// Where a walk of a whole stack ends: the function that started the process or thread,
// or a coroutine's stack (boost.context's make_fcontext, whose `finish` label is the
// return address at the bottom of every context it makes: PowerDNS Recursor's, folly's
// fibers', Boost.Asio's stackful coroutines'; glibc's __start_context for ucontext).
bool is_entry_function(const std::string& name) {
  for (const char* exact : {"_start", "__libc_start_main", "__libc_start_call_main", "clone", "clone3",
                            "start_thread", "execute_native_thread_routine", "make_fcontext",
                            "__start_context"})
    if (name == exact) return true;
  return false;
}

// What lies between that entry and the program's first function.
bool is_startup_function(const std::string& name) {
  if (is_entry_function(name)) return true;
  for (const char* prefix : {"std::", "__gnu_cxx::", "__cxxabiv1::", "void std::", "__libc_"})
    if (starts_with(name, prefix)) return true;
  return false;
}

}  // namespace

bool CallPaths::is_entry_frame(const PathFrame& frame) {
  const std::string& name = strings_->get(frame.name);
  if (is_entry_function(name)) return true;
  // std::thread's entry (execute_native_thread_routine) is a local symbol of
  // libstdc++, which ships without a symbol table: an unnamed frame of a runtime library.
  return is_unnamed(frame) && is_runtime_module(strings_->get(frame.module));
}

CallPaths::CallPaths(CodeNames* names, StringTable* strings, bool inlined)
    : names_(names), strings_(strings), inlined_(inlined), no_call_site_(strings->intern("(no call site)")),
      walk_cut_(strings->intern("(more callers: a walk keeps 64 to 128 frames)")),
      main_(strings->intern("main")) {}

std::vector<const PathFrame*> CallPaths::frames(uint32_t path) const {
  std::vector<const PathFrame*> out;
  for (uint32_t c = path; !is_empty(c); c = cells_[c].prev) out.push_back(&cells_[c].frame);
  std::reverse(out.begin(), out.end());
  return out;
}

uint32_t CallPaths::function_key(uint32_t name) {
  auto it = function_keys_.find(name);
  if (it != function_keys_.end()) return it->second;
  uint32_t key = strings_->intern(strip_parameters(strings_->get(name)));
  function_keys_.emplace(name, key);
  return key;
}

bool CallPaths::is_startup_frame(const PathFrame& frame) {
  auto it = startup_modules_.find(frame.module);
  if (it == startup_modules_.end())
    it = startup_modules_.emplace(frame.module, is_runtime_module(strings_->get(frame.module))).first;
  return it->second || is_startup_function(strings_->get(frame.name));
}

uint32_t CallPaths::push(uint32_t path, const PathFrame& frame, bool walked) {
  if (walked && ((path == kNone && is_entry_frame(frame)) || (in_startup(path) && is_startup_frame(frame))))
    return calls_main(frame) ? kMainNext : kStartupOnly;
  PathFrame kept = frame;
  if (path == kMainNext && is_unnamed(frame)) kept.name = main_;  // a stripped program's main
  if (is_empty(path)) path = kNone;
  uint32_t depth = path == kNone ? 1 : cells_[path].depth + 1;
  cells_.push_back({kept, path, depth});
  return static_cast<uint32_t>(cells_.size() - 1);
}

// glibc's function that calls main and nothing else (2.34 on): the frame after it in
// a path is in main. (__libc_start_main also runs the static constructors, through
// call_init inlined into it: the frame after it may be one of those.)
bool CallPaths::calls_main(const PathFrame& frame) const {
  return strings_->get(frame.name) == "__libc_start_call_main";
}

// A frame named by its module and offset: the module has no symbol for it.
bool CallPaths::is_unnamed(const PathFrame& frame) const {
  const std::string& module = strings_->get(frame.module);
  return !module.empty() && starts_with(strings_->get(frame.name), (base_name(module) + "+0x").c_str());
}

std::vector<PathFrame> CallPaths::chain_frames(const CodeInfo& info, uint64_t pc) {
  std::vector<PathFrame> chain;
  uint32_t module = strings_->intern(info.module);
  if (info.frames.empty()) {
    PathFrame f;
    f.name = strings_->intern(info.name());
    f.pc = pc;
    f.module = module;
    f.call = true;
    chain.push_back(f);
    return chain;
  }
  for (auto it = info.frames.rbegin(); it != info.frames.rend(); ++it) {
    PathFrame f;
    f.name = strings_->intern(it->inlined || info.function.empty() ? it->function : info.function);
    f.pc = pc;
    f.file = strings_->intern(it->file);
    f.line = it->line;
    f.module = module;
    f.call = true;
    f.inlined = it->inlined;
    chain.push_back(f);
  }
  return chain;
}

// Appends a call site's frames (outermost first) to a path, without repeating the
// frames the hooks already recorded: a function inlined into its caller still runs
// the hooks. Only hooked frames can repeat: each return address of a walked stack
// is a frame of its own, as in a recursion.
uint32_t CallPaths::merge_chain(uint32_t path, const std::vector<PathFrame>& chain, bool keep_inlined, bool walked) {
  std::vector<uint32_t> trailing;  // hooked cells at the end of the path, innermost first
  for (uint32_t c = path; !is_empty(c) && cells_[c].frame.hooked && trailing.size() < chain.size(); c = cells_[c].prev)
    trailing.push_back(c);
  size_t k = std::min(trailing.size(), chain.size());
  for (; k > 0; --k) {
    bool same = true;
    for (size_t i = 0; i < k && same; ++i)
      same = function_key(cells_[trailing[k - 1 - i]].frame.name) == function_key(chain[i].name);
    if (same) break;
  }
  uint32_t merged = path;
  for (size_t i = 0; i < k; ++i) merged = cells_[merged].prev;
  for (size_t i = 0; i < k; ++i) {
    PathFrame f = chain[i];
    const PathFrame& old = cells_[trailing[k - 1 - i]].frame;
    f.name = old.name;
    f.hooked = old.hooked;
    merged = push(merged, f, walked);
  }
  // A start-up frame that has the program's own code inlined into it (std::thread's
  // _M_run with the thread's lambda) is where the thread's code begins: dropping it
  // would root the path at what the lambda called.
  bool drops = walked && !(in_startup(merged) && inlines_program_code(chain));
  for (size_t i = k; i < chain.size(); ++i) {
    if (chain[i].inlined && !keep_inlined) continue;
    merged = push(merged, chain[i], drops);
  }
  return merged;
}

bool CallPaths::inlines_program_code(const std::vector<PathFrame>& chain) {
  for (const PathFrame& f : chain)
    if (f.inlined && !is_startup_frame(f)) return true;
  return false;
}

uint32_t CallPaths::extend_node(uint32_t path, const format::NodeDef& def, bool walked) {
  if (!def.function && def.call_site == format::kWalkCut) {
    PathFrame cut;
    cut.name = walk_cut_;
    return push(path, cut, false);
  }
  const CodeInfo* call = def.call_site ? &names_->call_site(def.call_site) : nullptr;
  if (!def.function) return call ? merge_chain(path, chain_frames(*call, def.call_site - 1), inlined_, walked) : path;
  if (!is_empty(path) && call && cells_[path].frame.hooked && call->function_address &&
      cells_[path].frame.pc == call->function_address) {
    // The call into this node lies in the parent: place the parent there.
    PathFrame placed = cells_[path].frame;
    std::vector<PathFrame> site_frames = chain_frames(*call, def.call_site - 1);
    placed.pc = def.call_site - 1;
    placed.call = true;
    placed.file = site_frames[0].file;
    placed.line = site_frames[0].line;
    placed.module = site_frames[0].module;
    path = push(cells_[path].prev, placed, false);
    if (inlined_ && site_frames.size() > 1) path = merge_chain(path, site_frames, true, false);
  }
  const CodeInfo& fn = names_->function(def.function);
  PathFrame f;
  f.name = strings_->intern(fn.name());
  f.pc = def.function;
  if (!fn.frames.empty()) {
    f.file = strings_->intern(fn.frames.back().file);
    f.line = fn.frames.back().line;
  }
  f.module = strings_->intern(fn.module);
  f.hooked = true;
  return push(path, f, false);
}

uint32_t CallPaths::node_path(uint32_t thread, const std::vector<format::NodeDef>& nodes, uint64_t node) {
  std::vector<uint64_t> chain;
  uint64_t current = node;
  uint32_t path = kNone;
  while (current) {
    auto known = node_paths_.find(node_key(thread, current));
    if (known != node_paths_.end()) {
      path = known->second;
      break;
    }
    chain.push_back(current);
    current = nodes[current].parent;  // the decoder checked parent < node
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    path = extended(path, nodes[*it]);
    node_paths_[node_key(thread, *it)] = path;
  }
  return path;
}

uint32_t CallPaths::extended(uint32_t path, const format::NodeDef& def) {
  Extension key{path, def.function, def.call_site};
  auto known = extensions_.find(key);
  if (known != extensions_.end()) return known->second;
  uint32_t next = extend_node(path, def, def.function == 0);
  extensions_.emplace(key, next);
  return next;
}

uint32_t CallPaths::context_path(uint32_t thread, const std::vector<format::NodeDef>& nodes, uint64_t node,
                                 uint64_t call_site) {
  bool in_tree = node > 0 && node < nodes.size();
  uint32_t path = in_tree ? node_path(thread, nodes, node) : kNone;
  bool walked = in_tree && nodes[node].function == 0;
  // As for nodes: the same path, call site and kind of path give the same cells.
  Extension key{path, walked ? 1u : 0u, call_site};
  auto known = context_paths_.find(key);
  if (known != context_paths_.end()) return known->second;
  if (call_site) path = merge_chain(path, chain_frames(names_->call_site(call_site), call_site - 1), inlined_, walked);
  if (is_empty(path)) {
    PathFrame f;
    f.name = no_call_site_;
    path = push(kNone, f, false);
  }
  context_paths_.emplace(key, path);
  return path;
}

}  // namespace core
}  // namespace heaptype
