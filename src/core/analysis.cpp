#include "analysis.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "allocation_wrappers.hpp"
#include "cxx_names.hpp"
#include "patterns.hpp"

namespace heaptype {
namespace core {

using format::Event;

namespace {

constexpr int kMaxDerivedHops = 64;  // a chain of derived sites longer than this is damage

uint64_t context_hash(uint32_t thread, uint64_t node, uint64_t call_site) {
  uint64_t h = (static_cast<uint64_t>(thread) * 0x9E3779B97F4A7C15ull) ^ (node * 0xC2B2AE3D27D4EB4Full);
  h ^= call_site * 0x165667B19E3779F9ull;
  h ^= h >> 33;  // the index keeps the high half: let every bit in
  h *= 0xFF51AFD7ED558CCDull;
  return h ^ (h >> 33);
}

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

Analysis::Analysis(const format::ProfileFile& file, CodeNames* names, AnalysisOptions options)
    : file_(file),
      names_(names),
      options_(std::move(options)),
      tick_ns_(file.header().clock_tick_ns ? file.header().clock_tick_ns : 1000),
      merge_(file, this),
      paths_(names, &strings_, options_.inlined) {
  if (options_.call_tree || options_.bottom_up) options_.functions = options_.functions || options_.call_tree;
  if (options_.follows(AnalysisOptions::Series::kFunction) || options_.follows(AnalysisOptions::Series::kCallPath))
    options_.call_tree = options_.functions = true;
  leaves_only_ = options_.path_leaves && !options_.call_tree && !options_.functions;
  untyped_label_ = strings_.intern("(untyped)");
  if (options_.addresses && !file.has_addresses())
    warnings_.push_back(file.path() + " was recorded without addresses (HEAPTYPE_ADDRESSES=1 records them): "
                        "no memory view");
  if (options_.filters_lifetime() && !file.has_addresses()) {
    warnings_.push_back(file.path() + " was recorded without addresses (HEAPTYPE_ADDRESSES=1 records them): "
                        "no lifetime filter");
    options_.min_lifetime = 0;
    options_.max_lifetime = UINT64_MAX;
  }
  add_timelines();
  counting_ = options_.window_begin == 0;
}

bool AnalysisOptions::follows(Series grouping) const {
  return std::find(timelines.begin(), timelines.end(), grouping) != timelines.end();
}

// One timeline per grouping asked for, each once, in the order asked.
void Analysis::add_timelines() {
  for (AnalysisOptions::Series grouping : options_.timelines) {
    if (grouping == AnalysisOptions::Series::kNone || timeline(grouping)) continue;
    timelines_.push_back(FollowedTimeline{grouping, Timeline(options_.timeline_points)});
  }
}

const Timeline* Analysis::timeline(AnalysisOptions::Series grouping) const {
  for (const FollowedTimeline& t : timelines_)
    if (grouping == AnalysisOptions::Series::kNone || t.grouping == grouping) return &t.timeline;
  return nullptr;
}

// --- groups ------------------------------------------------------------------------------

uint32_t Analysis::group_for_name(uint32_t name, bool inferred, uint64_t tag) {
  uint64_t key = (static_cast<uint64_t>(name) << 1) | (inferred ? 1 : 0);
  auto it = group_of_name_.find(key);
  if (it != group_of_name_.end()) return it->second;
  TypeGroup g;
  g.name = name;
  g.inferred = inferred;
  g.type_tag = tag;
  g.label = name == 0 ? untyped_label_ : inferred ? strings_.intern(strings_.get(name) + " (inferred)") : name;
  uint32_t id = static_cast<uint32_t>(types_.size());
  if (types_.size() == types_.capacity()) reserve_type_groups();
  types_.push_back(g);
  if (options_.histograms) histograms_.emplace_back();
  group_of_name_.emplace(key, id);
  return id;
}

// A group with its histograms is ~700 bytes and a test binary's profile names a thousand
// types: the vector grows to as many groups as the sites decoded so far could make (at
// most 8192 at once), rather than doubling and copying ten times.
void Analysis::reserve_type_groups() {
  size_t sites = 0;
  for (const format::ThreadEvents* stream : merge_.streams()) sites += stream->sites().size();
  types_.reserve(std::max(types_.capacity() * 2, std::min<size_t>(sites + 2, 8192)));
  if (options_.histograms) histograms_.reserve(types_.capacity());
}

// The interned name of the type a tag stands for: "(unknown type 0x...)" when the
// binaries do not say.
uint32_t Analysis::tag_name(uint64_t tag) {
  const std::string& name = names_->type_name(tag);
  return strings_.intern(name.empty() ? "(unknown type " + hex(tag) + ")" : name);
}

// The storage of a library's container (type_inference.hpp): a row of the container
// whose raw_hash_set or btree allocated it, found walking out from the allocation over
// its machinery (the allocation function is often a call of its own), one table or node
// per block. A block whose walk names no container keeps `name` and its objects.
uint32_t Analysis::container_group(uint32_t name, bool inferred, uint64_t tag, uint32_t context, uint64_t* objects) {
  std::string row;
  for (uint32_t c = context == kNone ? kNone : context_path(context); c != kNone; c = paths_.cell(c).prev) {
    StorageFrame frame = container_frame_at(paths_.cell(c).frame, &row);
    if (frame == StorageFrame::kOutside) break;
    if (frame == StorageFrame::kInside) continue;
    *objects = 1;
    return group_for_name(strings_.intern(row), inferred, tag);
  }
  return group_for_name(name, inferred, tag);
}

// What a path's frame says of a container's storage: a call's inlined frames first,
// innermost first (a path kept without them, as the report keeps it, has the function
// they were inlined into alone; the container's code is mostly inlined).
StorageFrame Analysis::container_frame_at(const PathFrame& frame, std::string* row) {
  if (frame.call) {
    const CodeInfo& info = names_->call_site(frame.pc + 1);
    for (const CodeFrame& inlined : info.frames) {
      StorageFrame said = container_frame(inlined.function, row);
      if (said != StorageFrame::kInside) return said;
    }
    if (!info.frames.empty()) return StorageFrame::kInside;
  }
  return container_frame(strings_.get(frame.name), row);
}

// A block from a function without a symbol in a stripped runtime library: named by the
// nearest function of that library on its path that has one (unnamed_function_row), found
// walking out over the library's unnamed frames; `row` when the path leaves the library
// first (the emergency pool's constructor, called by the loader) or is unknown.
uint32_t Analysis::unnamed_function_name(const std::string& row, uint32_t context) {
  uint32_t library = 0;
  for (uint32_t c = context_path(context); c != kNone; c = paths_.cell(c).prev) {
    const PathFrame& frame = paths_.cell(c).frame;
    if (library == 0) library = frame.module;
    if (frame.module == 0 || frame.module != library) break;  // no module: a path of "(no call site)"
    if (paths_.is_unnamed(frame)) continue;
    return strings_.intern(unnamed_function_row(row, strings_.get(frame.name)));
  }
  return strings_.intern(row);
}

uint32_t Analysis::type_group(uint64_t tag, uint32_t context, uint64_t size, uint64_t* objects) {
  if (tag) {
    auto it = group_of_tag_.find(tag);
    if (it != group_of_tag_.end()) return it->second;
    uint32_t name = tag_name(tag);
    if (container_storage_tags_.count(tag) || container_storage(strings_.get(name))) {
      container_storage_tags_.insert(tag);
      return container_group(name, false, tag, context, objects);
    }
    uint32_t id = group_for_name(name, false, tag);
    group_of_tag_.emplace(tag, id);
    return id;
  }
  const InferredType* inferred = options_.infer ? inferred_in(context) : nullptr;
  if (inferred && !inferred->name.empty()) {
    *objects = inferred->objects(1, size);
    const std::string& row = inferred->row(size);
    if (inferred->unnamed_function && row == inferred->name)
      return group_for_name(unnamed_function_name(row, context), false, 0);
    uint32_t name = strings_.intern(row);
    if (inferred->container_storage) return container_group(name, true, 0, context, objects);
    return group_for_name(name, !inferred->library, 0);
  }
  return group_for_name(0, false, 0);
}

// The type inferred at the context's call site, if any.
const InferredType* Analysis::inferred_in(uint32_t context) {
  if (context == kNone) return nullptr;
  Context& c = contexts_[context];
  if (!c.inferred_known) {
    c.inferred_known = true;
    if (c.call_site) c.inferred = &inferred_at(c.call_site);
  }
  return c.inferred;
}

// Whether blocks of type `tag` made at the context's call site are members of another
// object: the call site makes one T a block (std::make_unique<T>), and a type other than
// T was reported at the block's start. That report came from T's constructor building its
// first member in place (the new-expression inside make_unique reports nothing: it is
// compiled without the macro), and the call site may have learned it for its next blocks.
// Such blocks are untyped, or T's (inferred) where types are inferred.
bool Analysis::reported_member(uint64_t tag, uint32_t context) {
  const InferredType* inferred = inferred_in(context);
  if (!inferred || !inferred->one_object || inferred->name.empty()) return false;
  auto spaceless = [](std::string name) {
    name.erase(std::remove(name.begin(), name.end(), ' '), name.end());
    return name;
  };
  return spaceless(strings_.get(tag_name(tag))) != spaceless(inferred->name);
}

// The tag a site's blocks are counted by: the one reported, but none (one untyped
// object a block, or an inferred type) where that is a member's (reported_member).
uint64_t Analysis::block_tag(uint64_t reported, uint32_t context, uint64_t* objects) {
  if (!reported || !reported_member(reported, context)) return reported;
  *objects = 1;
  return 0;
}

// The type inferred from a call site's frames: the same for every context there.
const InferredType& Analysis::inferred_at(uint64_t call_site) {
  auto known = inferred_at_call_site_.find(call_site);
  if (known == inferred_at_call_site_.end())
    known = inferred_at_call_site_.emplace(call_site, infer_type(names_->call_site(call_site))).first;
  return known->second;
}

uint32_t Analysis::thread_group(uint32_t thread) {
  auto it = group_of_thread_.find(thread);
  if (it != group_of_thread_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(threads_.size());
  threads_.push_back(ThreadGroup{thread, {}});
  group_of_thread_.emplace(thread, id);
  return id;
}

uint32_t Analysis::function_group(uint32_t name) {
  auto it = group_of_function_.find(name);
  if (it != group_of_function_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(functions_.size());
  functions_.push_back(FunctionGroup{name, {}, {}});
  group_of_function_.emplace(name, id);
  return id;
}

// --- contexts ----------------------------------------------------------------------------

uint32_t Analysis::context_of(uint32_t thread, uint64_t node, uint64_t call_site) {
  uint64_t hash = context_hash(thread, node, call_site);
  size_t slot;
  uint32_t known = context_index_.find(
      hash,
      [&](uint32_t id) {
        const Context& c = contexts_[id];
        return c.thread == thread && c.node == node && c.call_site == call_site;
      },
      &slot);
  if (known != ContextIndex::kEmpty) return known;
  uint32_t id = static_cast<uint32_t>(contexts_.size());
  Context c;
  c.thread = thread;
  c.node = node;
  c.call_site = call_site;
  contexts_.push_back(c);
  context_index_.insert(slot, hash, id);
  return id;
}

uint32_t Analysis::context_path(uint32_t context) {
  Context& c = contexts_[context];
  if (c.path == kNone) {
    const format::ThreadEvents* stream = merge_.stream_of(c.thread);
    static const std::vector<format::NodeDef> kRootOnly{format::NodeDef{0, 0, 0}};
    const std::vector<format::NodeDef>& nodes = stream ? stream->nodes() : kRootOnly;
    uint64_t node = c.node < nodes.size() ? c.node : 0;
    uint32_t path = paths_.context_path(c.thread, nodes, node, c.call_site);
    contexts_[context].path = path;
  }
  return contexts_[context].path;
}

bool Analysis::keeps_context(uint32_t context) {
  if (options_.functions_on_path.empty()) return true;
  if (contexts_[context].keep >= 0) return contexts_[context].keep != 0;
  bool keep = false;
  for (uint32_t c = context_path(context); c != kNone && !keep; c = paths_.cell(c).prev) {
    uint32_t name = paths_.cell(c).frame.name;
    auto cached = function_matches_.find(name);
    if (cached == function_matches_.end()) {
      const std::string& full = strings_.get(name);
      bool match = any_match(options_.functions_on_path, full) ||
                   any_match(options_.functions_on_path, strip_parameters(full));
      cached = function_matches_.emplace(name, match ? 1 : 0).first;
    }
    keep = cached->second != 0;
  }
  contexts_[context].keep = keep ? 1 : 0;
  return keep;
}

// Contexts of the same path (its nodes defined again under new numbers, or by another
// thread) share their tree nodes: placing a path costs a lookup per frame, once.
uint32_t Analysis::tree_frame(uint32_t context) {
  if (contexts_[context].tree_frame != kNone) return contexts_[context].tree_frame;
  uint32_t path = context_path(context);
  auto placed = tree_frame_of_path_.find(path);
  if (placed != tree_frame_of_path_.end()) return contexts_[context].tree_frame = placed->second;
  uint32_t node = add_frames(&tree_, path, [this](uint32_t added, uint32_t name) {
    if (tree_.node(added).group == kNone) tree_.node(added).group = function_group(name);
  });
  tree_frame_of_path_.emplace(path, node);
  contexts_[context].tree_frame = node;
  return node;
}

const MergedTree* Analysis::live_tree() {
  if (options_.filters_lifetime()) return nullptr;
  if (live_tree_made_) return &live_tree_;
  live_tree_made_ = true;
  std::unordered_map<uint32_t, uint32_t> frame_of_path;
  for (auto& entry : placements_) {
    for (const Placement& p : entry.second) {
      if (!p.known || !p.selected || p.figures.live_blocks == 0) continue;
      uint32_t path = context_path(p.context);
      auto placed = frame_of_path.find(path);
      if (placed == frame_of_path.end())
        placed = frame_of_path.emplace(path, add_frames(&live_tree_, path, [](uint32_t, uint32_t) {})).first;
      Figures& leaf = live_tree_.node(live_tree_.child(placed->second, MergedTree::kType, p.type_group, false)).total;
      leaf.live_blocks = Figures::plus(leaf.live_blocks, p.figures.live_blocks);
      leaf.live_bytes = Figures::plus(leaf.live_bytes, p.figures.live_bytes);
    }
  }
  return &live_tree_;
}

// The function whose call made the allocation of `context`: its call site's innermost
// frame, or, where that is an allocation wrapper (xmalloc), the first caller that is not
// one, named with the wrapper it called: "f (through xmalloc)". Walks up only as far as
// that caller (the call site's inlined frames, then each node's call site), so a profile
// whose untyped blocks all come through xmalloc (GCC's) names a frame or two per
// context, not whole paths.
std::string Analysis::untyped_caller(uint32_t context, UntypedCallerNames* memo) {
  const Context& c = contexts_[context];
  if (!c.call_site) return "(no call site)";
  const CodeInfo& code = names_->call_site(c.call_site);
  // A function that has no name (a stripped module) is named by its module and offset.
  std::string caller = !code.frames.empty() ? code.frames.front().function : code.name();
  // Whether a call site's function is a wrapper, once per call site: a test suite's
  // profile has millions of contexts and few call sites.
  auto site = memo->wrapper_sites.find(c.call_site);
  if (site == memo->wrapper_sites.end())
    site = memo->wrapper_sites.emplace(c.call_site, is_allocation_wrapper(strip_parameters(caller))).first;
  if (!site->second) return caller;
  auto known = memo->by_context.find(context);
  if (known != memo->by_context.end()) return known->second;
  std::string wrapper = strip_parameters(caller);
  // The first function that is not a wrapper, from frame `first` of `at` (innermost,
  // inlined, first; a stripped module's code is one frame: its module and offset).
  auto caller_past_wrappers = [&](const CodeInfo& at, size_t first) -> bool {
    size_t count = at.frames.empty() ? 1 : at.frames.size();
    for (size_t i = first; i < count; ++i) {
      const std::string& function = at.frames.empty() ? at.name() : at.frames[i].function;
      std::string bare = strip_parameters(function);
      if (!is_allocation_wrapper(bare)) {
        caller = function + " (through " + wrapper + ")";
        return true;
      }
      wrapper = bare;  // the one the caller called
    }
    return false;
  };
  const format::ThreadEvents* stream = merge_.stream_of(c.thread);
  bool found = caller_past_wrappers(code, 1);
  for (uint64_t node = c.node; !found && stream && node > 0 && node < stream->nodes().size();) {
    const format::NodeDef& n = stream->nodes()[node];
    if (n.call_site) found = caller_past_wrappers(names_->call_site(n.call_site), 0);
    node = n.parent;
  }
  // Wrappers up to the root: the innermost is named.
  return memo->by_context.emplace(context, caller).first->second;
}

std::vector<std::pair<std::string, Figures>> Analysis::untyped_callers() {
  std::unordered_map<std::string, Figures> by_caller;
  UntypedCallerNames memo;
  for (const auto& entry : placements_) {
    for (const Placement& p : entry.second) {
      if (!p.known || !p.selected || types_[p.type_group].name != 0) continue;
      Figures& f = by_caller[untyped_caller(p.context, &memo)];
      f.add_counts(p.figures);
      f.live_bytes = Figures::plus(f.live_bytes, p.figures.live_bytes);
    }
  }
  std::vector<std::pair<std::string, Figures>> out(by_caller.begin(), by_caller.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second.bytes != b.second.bytes ? a.second.bytes > b.second.bytes : a.first < b.first;
  });
  return out;
}

uint32_t Analysis::bottom_leaf(uint32_t context) {
  if (contexts_[context].bottom_leaf != kNone) return contexts_[context].bottom_leaf;
  uint32_t path = context_path(context);
  auto placed = bottom_leaf_of_path_.find(path);
  if (placed != bottom_leaf_of_path_.end()) return contexts_[context].bottom_leaf = placed->second;
  uint32_t node = 0;
  for (uint32_t c = path; c != kNone; c = paths_.cell(c).prev) {
    const PathFrame& f = paths_.cell(c).frame;
    node = bottom_up_.child(node, MergedTree::kFrame, f.name, f.inlined && !f.hooked);
  }
  bottom_leaf_of_path_.emplace(path, node);
  contexts_[context].bottom_leaf = node;
  return node;
}

// --- placements ----------------------------------------------------------------------------

const format::SiteDef* Analysis::base_site(uint32_t thread, uint32_t site, uint32_t* base_thread) {
  for (int hops = 0; hops < kMaxDerivedHops; ++hops) {
    const format::ThreadEvents* stream = merge_.stream_of(thread);
    if (!stream || site >= stream->sites().size()) return nullptr;
    const format::SiteDef& def = stream->sites()[site];
    if (!def.derived) {
      *base_thread = thread;
      return &def;
    }
    thread = def.base_thread;
    site = def.base_site;
  }
  return nullptr;
}

bool Analysis::resolve(uint32_t thread, uint32_t site, Placement* p) {
  const format::SiteDef& def = merge_.stream_of(thread)->sites()[site];
  uint32_t base_thread = 0;
  const format::SiteDef* base = base_site(thread, site, &base_thread);
  if (!base) {
    warnings_.push_back("thread " + std::to_string(thread) + " site " + std::to_string(site) +
                        " derives from a site the profile does not define; its blocks are not counted");
    return false;
  }
  p->known = true;
  p->size = base->site.size;
  size_t bucket = p->size <= 1 ? 0 : static_cast<size_t>(64 - __builtin_clzll(p->size - 1));
  p->size_bucket = static_cast<uint32_t>(bucket < kSizeBuckets ? bucket : kSizeBuckets - 1);
  p->objects = def.site.count ? def.site.count : 1;
  p->context = context_of(base_thread, base->site.node, base->site.call_site);
  uint64_t tag = block_tag(def.site.type_tag, p->context, &p->objects);
  p->type_group = type_group(tag, p->context, p->size, &p->objects);
  p->thread_group = thread_group(base_thread);  // the thread that allocated, whoever named the type
  const TypeGroup& g = types_[p->type_group];
  p->selected = (options_.types.empty() || any_match(options_.types, strings_.get(g.label)) ||
                 (g.name && any_match(options_.types, strings_.get(g.name)))) &&
                (options_.threads.empty() ||
                 std::find(options_.threads.begin(), options_.threads.end(), thread) != options_.threads.end()) &&
                p->size >= options_.min_size && p->size <= options_.max_size && keeps_context(p->context);
  if (p->selected) place_in_trees(p);
  return true;
}

void Analysis::place_in_trees(Placement* p) {
  if (options_.functions || options_.call_tree || leaves_only_) {
    uint32_t frame = tree_frame(p->context);
    p->tree_leaf = tree_.child(frame, MergedTree::kType, p->type_group, false);
  }
  if (options_.bottom_up) bottom_leaf(p->context);
}

Placement* Analysis::find_placement(uint32_t thread, uint32_t site) {
  if (thread != cached_thread_ || !cached_placements_) {
    const format::ThreadEvents* stream = merge_.stream_of(thread);
    if (!stream) return nullptr;
    cached_thread_ = thread;
    cached_placements_ = &placements_[thread];
  }
  std::vector<Placement>& list = *cached_placements_;
  if (site >= list.size()) {
    const format::ThreadEvents* stream = merge_.stream_of(thread);
    if (site >= stream->sites().size()) return nullptr;
    list.resize(stream->sites().size());
  }
  Placement& p = list[site];
  if (!p.known && !resolve(thread, site, &p)) return nullptr;
  return &p;
}

bool Analysis::has_call_paths() const {
  for (const format::ThreadEvents* stream : merge_.streams())
    if (stream->nodes().size() > 1) return true;
  return false;
}

void Analysis::code_addresses(std::vector<uint64_t>* functions, std::vector<uint64_t>* call_sites) const {
  for (const format::ThreadEvents* stream : merge_.streams()) {
    for (const format::NodeDef& node : stream->nodes()) {
      if (node.function) functions->push_back(node.function);
      if (node.call_site) call_sites->push_back(node.call_site);
    }
    for (const format::SiteDef& site : stream->sites())
      if (site.site.call_site) call_sites->push_back(site.site.call_site);
  }
  for (std::vector<uint64_t>* list : {functions, call_sites}) {
    std::sort(list->begin(), list->end());
    list->erase(std::unique(list->begin(), list->end()), list->end());
  }
}

int64_t Analysis::live_blocks_at(uint32_t thread, uint32_t site) {
  auto it = placements_.find(thread);
  if (it == placements_.end() || site >= it->second.size()) return 0;
  return it->second[site].figures.live_blocks;
}

// --- applying events -------------------------------------------------------------------------

template <class Change>
void Analysis::change_groups(Placement& p, Change&& change) {
  change(p.figures);
  if (!p.selected || dropping_event_) return;
  change_kept_groups(p, change);
  if (!timelines_.empty()) follow_in_timelines(p);
}

// The groups a kept placement's blocks count in, its own figures and timelines aside.
template <class Change>
void Analysis::change_kept_groups(const Placement& p, Change&& change) {
  change(selected_);
  change(types_[p.type_group].figures);
  change(threads_[p.thread_group].figures);
  if (p.tree_leaf != kNone && leaves_only_) {
    change(tree_.node(p.tree_leaf).total);
  } else if (p.tree_leaf != kNone) {
    for (uint32_t n = p.tree_leaf; n != kNone;) {
      MergedTree::Node& node = tree_.node(n);
      change(node.total);
      if (node.first_of_function) change(functions_[node.group].total);
      n = node.parent;
    }
    MergedTree::Node& frame = tree_.node(tree_.node(p.tree_leaf).parent);
    change(frame.self);
    change(functions_[frame.group].self);
  }
  if (options_.bottom_up) {
    uint32_t leaf = contexts_[p.context].bottom_leaf;
    for (uint32_t n = leaf; n != kNone; n = bottom_up_.node(n).parent) change(bottom_up_.node(n).total);
    change(bottom_up_.node(leaf).self);
  }
}

void Analysis::add_aggregated(Placement& p, const Figures& counts) {
  change_groups(p, [&](Figures& f) { f.add_aggregated(counts); });
}

void Analysis::allocate(Placement& p, uint64_t time) {
  uint64_t size = p.size, objects = p.objects;
  if (counting_ && p.selected && options_.histograms) ++histograms_[p.type_group].sizes[p.size_bucket];
  if (counting_) {
    change_groups(p, [&](Figures& f) { f.allocate(size, objects, time); });
  } else {
    change_groups(p, [&](Figures& f) { f.restore_live(size); });
  }
}

void Analysis::release(Placement& p, bool temporary) {
  uint64_t size = p.size;
  bool counted = temporary && counting_;
  change_groups(p, [&](Figures& f) { f.release(size, counted); });
}

// A block leaving its group for a typed one. Before or inside a time window its
// allocation may not have been counted: only its live bytes move then.
void Analysis::unallocate(Placement& p) {
  uint64_t size = p.size, objects = p.objects;
  if (counting_ && options_.window_begin == 0) {
    change_groups(p, [&](Figures& f) { f.unallocate(size, objects); });
  } else {
    change_groups(p, [&](Figures& f) { f.release(size, false); });
  }
}

// A span ends: the groups' figures are kept, and their peaks start again from what
// is live now (the next span's first moment).
void Analysis::close_bucket(uint64_t next_start) {
  auto restart = [next_start](Figures& f) {
    f.peak_bytes = f.live_bytes > 0 ? static_cast<uint64_t>(f.live_bytes) : 0;
    f.peak_time = next_start;
  };
  BucketSnapshot snap;
  snap.selected = selected_;
  restart(selected_);
  for (TypeGroup& g : types_) {
    snap.types.push_back(g.figures);
    restart(g.figures);
  }
  for (FunctionGroup& g : functions_) {
    snap.function_self.push_back(g.self);
    snap.function_total.push_back(g.total);
    restart(g.self);
    restart(g.total);
  }
  for (uint32_t id : options_.bucket_nodes) {
    if (id < tree_.size()) {
      snap.nodes.push_back(tree_.node(id).total);
      restart(tree_.node(id).total);
    } else {
      snap.nodes.push_back(Figures());
    }
  }
  buckets_.push_back(std::move(snap));
}

// The window opens: what is live then counts as each group's peak so far.
void Analysis::open_window(uint64_t time) {
  counting_ = true;
  auto reset = [time](Figures& f) {
    f.peak_bytes = f.live_bytes > 0 ? static_cast<uint64_t>(f.live_bytes) : 0;
    f.peak_time = time;
  };
  reset(totals_);
  reset(selected_);
  for (TypeGroup& g : types_) reset(g.figures);
  for (ThreadGroup& g : threads_) reset(g.figures);
  for (FunctionGroup& g : functions_) {
    reset(g.self);
    reset(g.total);
  }
  for (MergedTree* tree : {&tree_, &bottom_up_}) {
    for (uint32_t id = 0; id < tree->size(); ++id) {
      reset(tree->node(id).total);
      reset(tree->node(id).self);
    }
  }
  for (auto& entry : placements_)
    for (Placement& p : entry.second) reset(p.figures);
}

// Each timeline follows the group of its grouping that a placement's blocks count in:
// exactly one per placement (a function's own allocations, a path's type leaf).
void Analysis::follow_in_timelines(const Placement& p) {
  using Series = AnalysisOptions::Series;
  for (FollowedTimeline& followed : timelines_) {
    Timeline& t = followed.timeline;
    switch (followed.grouping) {
      case Series::kType:
        t.change(p.type_group, types_[p.type_group].figures.live_bytes);
        break;
      case Series::kThread:
        t.change(p.thread_group, threads_[p.thread_group].figures.live_bytes);
        break;
      case Series::kFunction:
        if (p.tree_leaf != kNone) {
          uint32_t group = tree_.node(tree_.node(p.tree_leaf).parent).group;
          t.change(group, functions_[group].self.live_bytes);
        }
        break;
      case Series::kCallPath:
        if (p.tree_leaf != kNone) t.change(p.tree_leaf, tree_.node(p.tree_leaf).total.live_bytes);
        break;
      case Series::kNone:
        break;
    }
  }
}

// A placement left with fewer than zero live blocks was freed more often than the
// profile allocated there (a file cut short, a damaged one): those frees matched
// nothing. They are taken back from every group, without touching any peak.
void Analysis::take_back_unmatched_frees() {
  for (auto& entry : placements_) {
    for (Placement& p : entry.second) {
      while (p.known && p.figures.live_blocks < 0) {
        uint64_t size = p.size;
        change_groups(p, [&](Figures& f) { f.restore_live(size); });
        totals_.restore_live(size);
        ++totals_.unmatched_frees;
        --totals_.frees;
      }
    }
  }
}

void Analysis::track_address(const Event& e) {
  switch (e.kind) {
    case Event::kAlloc:
      live_addresses_[e.address] = LiveAddress{(static_cast<uint64_t>(e.stream) << 32) | e.site, e.time};
      break;
    case Event::kFree: {
      auto it = live_addresses_.find(e.address);
      if (it == live_addresses_.end()) break;
      count_lifetime(it->second.placement, e.time - it->second.time);
      live_addresses_.erase(it);
      break;
    }
    case Event::kMove: {
      LiveAddress& live = live_addresses_[e.address];
      live.placement = (static_cast<uint64_t>(e.stream) << 32) | e.new_site;
      break;
    }
    case Event::kStack:
      break;
  }
}

// ticks == UINT64_MAX: never freed.
void Analysis::count_lifetime(uint64_t key, uint64_t ticks) {
  auto thread = placements_.find(static_cast<uint32_t>(key >> 32));
  uint32_t site = static_cast<uint32_t>(key);
  if (thread == placements_.end() || site >= thread->second.size()) return;
  const Placement& p = thread->second[site];
  if (!p.known || !p.selected || !counting_ || dropping_event_) return;
  size_t bucket = kLifetimeBuckets - 1;
  if (ticks != UINT64_MAX) {
    double ns = static_cast<double>(ticks) * static_cast<double>(tick_ns_);
    bucket = 0;
    for (double limit = 1000; bucket < kLifetimeBuckets - 2 && ns >= limit; limit *= 10) ++bucket;
  }
  if (options_.histograms) ++histograms_[p.type_group].lifetimes[bucket];
}

std::vector<LiveBlock> Analysis::live_blocks() const {
  std::vector<LiveBlock> out;
  out.reserve(live_addresses_.size());
  for (const auto& entry : live_addresses_) {
    if (dropped_addresses_.count(entry.first)) continue;
    auto thread = placements_.find(static_cast<uint32_t>(entry.second.placement >> 32));
    uint32_t site = static_cast<uint32_t>(entry.second.placement);
    if (thread == placements_.end() || site >= thread->second.size() || !thread->second[site].known) continue;
    const Placement& p = thread->second[site];
    if (p.selected) out.push_back(LiveBlock{entry.first, p.size, p.type_group});
  }
  std::sort(out.begin(), out.end(), [](const LiveBlock& a, const LiveBlock& b) { return a.address < b.address; });
  return out;
}

// First pass of the lifetime filter: each allocation's number, and whether its block
// lived within the limits, known at its free.
void Analysis::mark_lifetime(const Event& e) {
  if (e.kind == Event::kAlloc) {
    births_[e.address] = Birth{allocations_seen_++, e.time};
    lifetime_kept_.push_back(false);
    return;
  }
  if (e.kind != Event::kFree) return;
  auto it = births_.find(e.address);
  if (it == births_.end()) return;
  uint64_t lifetime = e.time - it->second.time;
  lifetime_kept_[it->second.allocation] = lifetime >= options_.min_lifetime && lifetime <= options_.max_lifetime;
  births_.erase(it);
}

void Analysis::select_by_lifetime(const ProgressFn& progress) {
  AnalysisOptions first_options;  // no filter: the merge sees the same blocks in both passes
  first_options.infer = false;
  Analysis first(file_, names_, first_options);
  first.marking_lifetimes_ = true;
  first.options_.min_lifetime = options_.min_lifetime;  // read by mark_lifetime only
  first.options_.max_lifetime = options_.max_lifetime;
  first.run(progress);
  lifetime_kept_ = std::move(first.lifetime_kept_);
  if (options_.max_lifetime == UINT64_MAX)  // never freed: it lives forever
    for (const auto& entry : first.births_) lifetime_kept_[entry.second.allocation] = true;
}

// Second pass: is this event about a block the lifetime filter leaves out?
bool Analysis::dropped_by_lifetime(const Event& e) {
  switch (e.kind) {
    case Event::kAlloc: {
      uint64_t n = allocations_seen_++;
      bool dropped = n >= lifetime_kept_.size() || !lifetime_kept_[n];
      if (dropped) dropped_addresses_.insert(e.address);
      return dropped;
    }
    case Event::kFree:
      return dropped_addresses_.erase(e.address) > 0;
    case Event::kMove:
      return dropped_addresses_.count(e.address) > 0;
    case Event::kStack:
      return false;
  }
  return false;
}

// A thread reports how deep its stack went: the stacks' total moves by the change.
void Analysis::apply_stack(const Event& e) {
  ThreadGroup& g = threads_[thread_group(e.stream)];
  totals_.stack_bytes = totals_.stack_bytes - g.stack_bytes + e.address;
  g.stack_bytes = e.address;
  g.stack_peak_bytes = std::max(g.stack_peak_bytes, e.address);
  if (totals_.stack_bytes > totals_.stack_peak_bytes) {
    totals_.stack_peak_bytes = totals_.stack_bytes;
    totals_.stack_peak_time = e.time;
  }
  for (FollowedTimeline& t : timelines_) t.timeline.stack(static_cast<int64_t>(totals_.stack_bytes));
}

namespace {

uint64_t placement_key(uint32_t thread, uint32_t site) { return static_cast<uint64_t>(thread) << 32 | site; }

}  // namespace

// Whether the filters keep the block of the event applied now.
bool Analysis::kept(const Placement& p) const { return p.selected && !dropping_event_; }

inline void Analysis::apply_alloc(const Event& e) {
  Placement* p = placement(e.stream, e.site);
  if (!p) return;
  temporaries_.allocated(e.stream, e.site);
  allocate(*p, e.time);
  totals_.allocate(p->size, p->objects, e.time);
  if (totals_.live_blocks > 0)
    totals_.peak_live_blocks = std::max(totals_.peak_live_blocks, static_cast<uint64_t>(totals_.live_blocks));
  merge_.on_live_block(e.stream, e.site);
  if (observer_) observer_->allocated(placement_key(e.stream, e.site), *p, kept(*p), e.time);
}

inline void Analysis::apply_free(const Event& e) {
  Placement* p = placement(e.thread, e.site);
  if (!p) {
    ++totals_.unmatched_frees;
    return;
  }
  bool temporary = temporaries_.freed(e.thread, e.site);
  release(*p, temporary);
  totals_.release(p->size, temporary);
  ++totals_.frees;
  if (observer_) observer_->freed(placement_key(e.thread, e.site), *p, kept(*p), e.time);
}

void Analysis::apply(const Event& e) {
  if (e.time > totals_.duration) totals_.duration = e.time;
  if (e.kind == Event::kStack) return apply_stack(e);
  if (marking_lifetimes_)
    mark_lifetime(e);
  else if (options_.filters_lifetime())
    dropping_event_ = dropped_by_lifetime(e);
  if (options_.addresses) track_address(e);
  switch (e.kind) {
    case Event::kAlloc:
      return apply_alloc(e);
    case Event::kFree:
      return apply_free(e);
    case Event::kMove: {
      temporaries_.moved(e.stream, e.thread, e.site, e.new_site);
      Placement* to = placement(e.stream, e.new_site);
      Placement* from = placement(e.thread, e.site);
      to = to ? placement(e.stream, e.new_site) : nullptr;  // the lookup of `from` may have grown the table
      if (!from || !to) {
        ++totals_.unmatched_frees;
        return;
      }
      unallocate(*from);
      if (counting_ && options_.window_begin == 0) {
        allocate(*to, e.time);
      } else {
        uint64_t size = to->size;
        change_groups(*to, [&](Figures& f) { f.add_live(size, e.time); });
      }
      merge_.on_live_block(e.stream, e.new_site);
      if (observer_)
        observer_->moved(placement_key(e.thread, e.site), placement_key(e.stream, e.new_site), *to, kept(*from),
                         kept(*to), e.time);
      return;
    }
    case Event::kStack:  // applied above
      return;
  }
}

// One event in merged order; false when the pass stops before it (the window's end)
// or after it (stop_after_events).
inline bool Analysis::take(const Event& e) {
  if (e.time > options_.window_end) return false;  // the state at the window's end
  const std::vector<uint64_t>& ends = options_.bucket_ends;
  while (buckets_.size() < ends.size() && e.time > ends[buckets_.size()]) close_bucket(ends[buckets_.size()] + 1);
  if (!counting_ && e.time >= options_.window_begin) open_window(e.time);
  for (FollowedTimeline& t : timelines_) t.timeline.before(e.time, selected_.live_bytes);
  uint64_t peak = selected_.peak_bytes;
  apply(e);
  ++totals_.events;
  if (selected_.peak_bytes != peak) totals_.peak_event = totals_.events;
  for (FollowedTimeline& t : timelines_) t.timeline.after(e.time, selected_.live_bytes);
  return !options_.stop_after_events || totals_.events < options_.stop_after_events;
}

// No option of this pass looks at each event (time windows and spans, a stop, the
// lifetime filter, addresses): a plain run goes through take_plain_run.
bool Analysis::plain_pass() const {
  return counting_ && options_.window_end == UINT64_MAX && options_.bucket_ends.empty() &&
         !options_.stop_after_events && !marking_lifetimes_ && !options_.filters_lifetime() && !options_.addresses;
}

// take() for each event of a plain run in a plain pass: allocations and frees of the
// stream's own sites (thread == stream), applied as apply_alloc and apply_free do but
// without a branch on which, as their mix is unpredictable. No stream is parked during
// a run (EventMerge::next_run): an allocation wakes none.
//
// Only live bytes make peaks: the groups' live bytes follow each event, their other
// counts (allocations, objects, bytes, live blocks, temporaries) go to them once per run
// and placement, as the difference its own figures (followed at each event) made.
void Analysis::take_plain_run(const Event* run, size_t count) {
  if (count == 0) return;
  uint64_t events = totals_.events;  // here, and the duration, once per run
  totals_.duration = std::max(totals_.duration, run[count - 1].time);  // a stream's times never decrease
  ++run_number_;
  const bool histograms = options_.histograms;
  for (const Event* e = run; e != run + count; ++e) {
    for (FollowedTimeline& t : timelines_) t.timeline.before(e->time, selected_.live_bytes);
    uint64_t peak = selected_.peak_bytes;
    bool alloc = e->kind == Event::kAlloc;
    Placement* p = placement(e->thread, e->site);
    if (p) {
      bool temporary = temporaries_.allocated_or_freed(alloc, e->thread, e->site);
      uint64_t size = p->size, objects = p->objects, time = e->time;
      if (p->selected) {
        if (p->run != run_number_) {
          p->run = run_number_;
          run_placements_.push_back(RunStart{e->thread, e->site, p->figures});
        }
        if (histograms) histograms_[p->type_group].sizes[p->size_bucket] += alloc;
      }
      p->figures.allocate_or_release(alloc, size, objects, temporary, time);
      if (p->selected) {
        int64_t change = alloc ? static_cast<int64_t>(size) : -static_cast<int64_t>(size);
        change_kept_groups(*p, [&](Figures& f) { f.move_live(change, alloc, time); });
        if (!timelines_.empty()) follow_in_timelines(*p);
      }
      totals_.allocate_or_release(alloc, size, objects, temporary, time);
      totals_.frees += !alloc;
      uint64_t live = totals_.live_blocks > 0 ? static_cast<uint64_t>(totals_.live_blocks) : 0;
      totals_.peak_live_blocks = std::max(totals_.peak_live_blocks, live);
      if (observer_) {
        uint64_t key = placement_key(e->thread, e->site);
        if (alloc)
          observer_->allocated(key, *p, kept(*p), time);
        else
          observer_->freed(key, *p, kept(*p), time);
      }
    } else {
      totals_.unmatched_frees += !alloc;
    }
    ++events;
    if (selected_.peak_bytes != peak) totals_.peak_event = events;
    for (FollowedTimeline& t : timelines_) t.timeline.after(e->time, selected_.live_bytes);
  }
  totals_.events = events;
  // A placement met in the run (its vector may have grown since: found again by number).
  for (const RunStart& start : run_placements_) {
    Placement* p = placement(start.thread, start.site);
    Figures added = p->figures.counts_since(start.figures);
    change_kept_groups(*p, [&](Figures& f) { f.add_counts(added); });
  }
  run_placements_.clear();
}

void Analysis::run(const ProgressFn& progress) {
  if (options_.filters_lifetime() && !marking_lifetimes_) select_by_lifetime(progress);
  ProgressTask task(progress, "reading " + file_.path());
  uint64_t total_bytes = file_.event_bytes() ? file_.event_bytes() : 1;
  uint64_t count = 0;
  Event single;
  if (file_.aggregated()) apply_aggregate();  // then its events: those after its END chunk
  bool replay = !(file_.aggregated() && options_.stop_after_events);  // the peak's counts are all there is
  for (bool going = replay; going;) {
    // Most events come in plain runs that the merge hands over without a look at each.
    const Event* run = nullptr;
    size_t n = merge_.next_run(&run);
    bool plain = n > 0;
    if (!plain) {
      if (!merge_.next(&single)) break;
      run = &single;
      n = 1;
    }
    if (plain && plain_pass()) {
      take_plain_run(run, n);
      if (((count + n) ^ count) > 0xffff) task.update(static_cast<double>(merge_.bytes_done()) / total_bytes);
      count += n;
      merge_.skip_run(n);
      continue;
    }
    for (size_t i = 0; i < n && going; ++i) {
      going = take(run[i]);
      if ((++count & 0xffff) == 0) task.update(static_cast<double>(merge_.bytes_done()) / total_bytes);
    }
    if (plain && going) merge_.skip_run(n);
  }
  task.finish();
  dropping_event_ = false;
  take_back_unmatched_frees();
  const std::vector<uint64_t>& ends = options_.bucket_ends;
  while (buckets_.size() < ends.size()) close_bucket(ends[buckets_.size()] + 1);
  for (const auto& entry : live_addresses_) {
    dropping_event_ = dropped_addresses_.count(entry.first) > 0;
    count_lifetime(entry.second.placement, UINT64_MAX);
  }
  dropping_event_ = false;
  for (const format::ThreadEvents* stream : merge_.streams())
    if (!stream->error().empty()) warnings_.push_back("damaged events: " + stream->error());
  collect_findings();
  if (totals_.unmatched_frees)
    warnings_.push_back(std::to_string(totals_.unmatched_frees) +
                        " frees refer to blocks the profile does not hold (their allocation is missing)");
}

void Analysis::collect_findings() {
  std::map<std::tuple<uint64_t, uint32_t, uint32_t, uint64_t, uint64_t, uint32_t>, size_t> index;
  uint32_t unknown_block = strings_.intern("(unknown block)");
  for (const format::ThreadEvents* stream : merge_.streams()) {
    for (const auto& entry : stream->findings()) {
      const format::FindingDef& def = entry.first;
      Finding f;
      f.kind = def.kind;
      f.allocated = unknown_block;
      uint32_t base_thread = 0;
      const format::SiteDef* base = def.thread ? base_site(def.thread, def.site, &base_thread) : nullptr;
      if (base) {
        const format::SiteDef& own = merge_.stream_of(def.thread)->sites()[def.site];
        f.allocated_bytes = base->site.size;
        uint32_t context = context_of(base_thread, base->site.node, base->site.call_site);
        uint64_t objects = own.site.count ? own.site.count : 1;
        uint64_t tag = block_tag(own.site.type_tag, context, &objects);
        f.allocated = types_[type_group(tag, context, f.allocated_bytes, &objects)].label;
        f.allocation_path = context_path(context);
      }
      if (def.kind == static_cast<uint64_t>(format::FindingKind::kMismatchedDelete)) {
        f.deleted = def.a ? tag_name(def.a) : untyped_label_;
        f.deleted_bytes = def.b;
      } else {
        f.allocated_with = def.a;
        f.released_with = def.b;
      }
      f.path = context_path(context_of(stream->thread(), def.node, def.call_site));
      auto key = std::make_tuple(f.kind, f.allocated, f.deleted, f.deleted_bytes + f.allocated_with,
                                 f.released_with, f.path);
      auto it = index.find(key);
      if (it == index.end()) {
        f.count = entry.second;
        index.emplace(key, findings_.size());
        findings_.push_back(f);
      } else {
        findings_[it->second].count += entry.second;
      }
    }
  }
  std::stable_sort(findings_.begin(), findings_.end(),
                   [](const Finding& a, const Finding& b) { return a.count > b.count; });
}

}  // namespace core
}  // namespace heaptype
