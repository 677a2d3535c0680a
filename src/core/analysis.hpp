// analysis.hpp: one streaming pass over a profile, in the C++ core.
//
// Events are read chunk by chunk in merged time order (event_merge.hpp) and
// applied to every group an allocation belongs to: its type, its thread, and,
// when asked for, every node of the merged call tree above it and every function
// on its path. Each group's peak is the most bytes that group held live at any one
// moment, with the time it happened: never a sum of its members' peaks.
//
// Memory grows with distinct sites, contexts and groups, never with the file's
// size or with the number of live blocks: a free names its block's site (see
// profile_format.hpp). Nothing recurses: call paths 100,000 frames deep work.
#ifndef HEAPTYPE_CORE_ANALYSIS_HPP
#define HEAPTYPE_CORE_ANALYSIS_HPP

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "../format/profile_file.hpp"
#include "call_paths.hpp"
#include "code_names.hpp"
#include "context_index.hpp"
#include "event_merge.hpp"
#include "figures.hpp"
#include "merged_tree.hpp"
#include "progress.hpp"
#include "string_table.hpp"
#include "temporaries.hpp"
#include "timeline.hpp"
#include "type_inference.hpp"

namespace heaptype {
namespace core {

struct AnalysisOptions {
  bool call_tree = false;   // the merged call tree, types as its leaves
  // Only the merged tree's leaves counted (one row per call path and type): its frames'
  // figures are not kept event by event, which costs a step per frame of the path.
  bool path_leaves = false;
  bool bottom_up = false;   // the reversed tree: allocating frames first, then their callers
  bool functions = false;   // self and total figures per function
  bool inlined = false;     // functions inlined at call sites (DWARF) are frames of their own
  bool infer = true;        // untyped allocations at allocator frames get an inferred type
  bool histograms = true;   // each type's block sizes and lifetimes (TypeHistograms)
  // Filters; an allocation is kept when it passes all of them. Globs (patterns.hpp).
  std::vector<std::string> types;      // its type's name or label matches one
  std::vector<std::string> functions_on_path;  // a frame of its path matches one
  std::vector<uint32_t> threads;       // it was allocated by one of these threads
  uint64_t min_size = 0;               // its block has at least / at most this many bytes
  uint64_t max_size = UINT64_MAX;
  // What happened between two times (clock ticks): allocations made then, peaks
  // reached then; the pass stops at `window_end`, so live figures are those at it.
  // Before `window_begin` blocks come and go without being counted.
  uint64_t window_begin = 0;
  uint64_t window_end = UINT64_MAX;
  uint64_t stop_after_events = 0;      // stop after this many events (0: never), e.g. at a peak
  // Blocks that lived this long (clock ticks from allocation to free; one never freed
  // lives forever). Needs a profile with addresses: a first pass finds each
  // block's lifetime, the second keeps the blocks within it.
  uint64_t min_lifetime = 0;
  uint64_t max_lifetime = UINT64_MAX;
  bool filters_lifetime() const { return min_lifetime > 0 || max_lifetime != UINT64_MAX; }
  // Timelines: live bytes over time of every group of a grouping (type, thread,
  // function: its own allocations, call path: type-leaf tree nodes); the caller picks
  // which to show after the pass. Several groupings share the pass: the events are
  // decoded once and each grouping's timeline follows the same changes.
  enum class Series { kNone, kType, kThread, kFunction, kCallPath };
  std::vector<Series> timelines;  // each grouping once; kNone is ignored
  size_t timeline_points = 2000;
  bool follows(Series grouping) const;
  // Keep the address of every live block (profiles recorded with addresses): the
  // memory view of the moment the pass stops.
  bool addresses = false;
  // Spans of time, each ending at one of these ticks (inclusive, ascending): the
  // figures of every type, function and of these call-tree nodes within each span,
  // in one pass. In such a pass the groups' own peaks are per span.
  std::vector<uint64_t> bucket_ends;
  std::vector<uint32_t> bucket_nodes;
};

// The cumulative figures of the groups at the end of one span; peaks are the span's.
struct BucketSnapshot {
  Figures selected;
  std::vector<Figures> types;
  std::vector<Figures> function_self, function_total;
  std::vector<Figures> nodes;  // of AnalysisOptions::bucket_nodes, in that order
};

// A live block of the memory view.
struct LiveBlock {
  uint64_t address;
  uint64_t size;
  uint32_t type_group;
};

struct Totals : Figures {
  uint64_t events = 0;            // applied
  uint64_t peak_event = 0;        // the event (1-based) at which the kept allocations peaked
  uint64_t frees = 0;
  uint64_t unmatched_frees = 0;   // frees and moves of blocks the profile does not hold
  uint64_t peak_live_blocks = 0;  // the most blocks live at once
  uint64_t duration = 0;          // time of the last event
  // The threads' stacks together (STACK records: their depths in bytes, as last
  // reported), and the deepest they went at once.
  uint64_t stack_bytes = 0;
  uint64_t stack_peak_bytes = 0;
  uint64_t stack_peak_time = 0;
};

// Lifetimes of blocks, from their allocation to their free: under 1 us, 10 us,
// 100 us, 1 ms, 10 ms, 100 ms, 1 s, longer, never freed.
constexpr size_t kLifetimeBuckets = 9;
// Block sizes: bucket k holds sizes in (2^(k-1), 2^k], bucket 0 size 0 and 1.
constexpr size_t kSizeBuckets = 64;

struct TypeGroup {
  uint32_t name = 0;        // interned type name; 0: untyped
  bool inferred = false;    // read from the allocator frames at the call site
  uint32_t label = 0;       // interned: "T", "T (inferred)", "(untyped)"
  uint64_t type_tag = 0;    // one of the tags that name this type (0 untyped)
  Figures figures;
  // Aggregated profiles (see aggregate_analysis.cpp): the peak is what this group had
  // live at the heap's peak, not its own most (which only typed groups keep).
  bool peak_at_heap_peak = false;
};

// A type's histograms, apart from its group: 600 bytes a type that a check of figures
// (BudgetRows: a thousand types per test binary) neither fills nor reads.
struct TypeHistograms {
  uint64_t sizes[kSizeBuckets] = {};          // allocations by block size
  uint64_t lifetimes[kLifetimeBuckets] = {};  // blocks by lifetime (profiles with addresses)
};

struct FunctionGroup {
  uint32_t name = 0;
  Figures self;   // allocations this function called the allocator for
  Figures total;  // allocations made while it was on the stack (once per recursion)
};

struct ThreadGroup {
  uint32_t thread = 0;
  Figures figures;
  uint64_t stack_bytes = 0;       // how deep its stack went, as last reported (STACK records)
  uint64_t stack_peak_bytes = 0;  // the deepest it went
};

// A calling context: where blocks were allocated from.
struct Context {
  uint32_t thread;
  uint64_t node;
  uint64_t call_site;
  uint32_t path = kNone;         // CallPaths cell, when resolved
  uint32_t tree_frame = kNone;   // MergedTree node of the path's last frame
  uint32_t bottom_leaf = kNone;  // bottom-up tree node of the path's first frame
  int8_t keep = -1;              // function filter: -1 not decided yet
  bool inferred_known = false;
  // The type inferred at its call site (shared by every context there: a profile can
  // define millions of contexts), nullptr when it has none.
  const InferredType* inferred = nullptr;
};

// The blocks of one (thread, site): one size, one type, one context.
struct Placement {
  bool known = false;
  bool selected = false;
  uint32_t context = kNone;
  uint32_t type_group = 0;
  uint32_t thread_group = 0;
  uint32_t tree_leaf = kNone;   // the type node under the context's last frame
  uint64_t size = 0;
  uint64_t objects = 1;
  uint32_t size_bucket = 0;     // of TypeGroup::sizes
  uint64_t run = 0;             // the last plain run that met it (Analysis::take_plain_run)
  Figures figures;
};

// Releases the program got wrong (FINDING records), grouped by kind, the block's
// type, the type or function family it was released as, and the release's call path.
struct Finding {
  uint64_t kind = 0;            // format::FindingKind
  uint32_t allocated = 0;       // interned type label of the block ("(untyped)", "(unknown block)")
  uint64_t allocated_bytes = 0; // the block's size
  uint32_t deleted = 0;         // kMismatchedDelete: interned name of the static type deleted
  uint64_t deleted_bytes = 0;   // kMismatchedDelete: the bytes that type says
  uint64_t allocated_with = 0;  // kMismatchedFree: format::AllocFamily of the allocation
  uint64_t released_with = 0;   // kMismatchedFree: ... and of the release
  uint64_t count = 0;
  uint32_t path = kNone;        // CallPaths cell: the release's call path
  uint32_t allocation_path = kNone;  // ... and the block's allocation's
};

// Sees the events the analysis applies, in its merged order, with the placement each
// names (for exports that replay events: heaptrack's format). `key` is a placement's
// (thread << 32 | site); `selected`: the filters keep its blocks. Frees and moves of
// blocks the profile does not hold are not passed on.
class EventObserver {
 public:
  virtual ~EventObserver() = default;
  virtual void allocated(uint64_t key, const Placement& p, bool selected, uint64_t time) = 0;
  virtual void freed(uint64_t key, const Placement& p, bool selected, uint64_t time) = 0;
  // A block counted at `from` counts at `to` from now on (its type came late).
  virtual void moved(uint64_t from, uint64_t to, const Placement& p_to, bool from_selected, bool to_selected,
                     uint64_t time) = 0;
};

class Analysis : public BlockLedger {
 public:
  Analysis(const format::ProfileFile& file, CodeNames* names, AnalysisOptions options);
  void run(const ProgressFn& progress = nullptr);
  // Passes every event `run` applies to `observer` (not owned; nullptr: none).
  void observe(EventObserver* observer) { observer_ = observer; }

  const AnalysisOptions& options() const { return options_; }
  const Totals& totals() const { return totals_; }       // the whole profile
  const Figures& selected() const { return selected_; }  // what the filters keep
  const std::vector<TypeGroup>& types() const { return types_; }
  // The histograms of type group `group`; nullptr when options().histograms is off.
  const TypeHistograms* histograms(uint32_t group) const {
    return group < histograms_.size() ? &histograms_[group] : nullptr;
  }
  const std::vector<FunctionGroup>& functions() const { return functions_; }
  const std::vector<ThreadGroup>& threads() const { return threads_; }
  const MergedTree& tree() const { return tree_; }
  // The merged tree of only the call paths that hold blocks live at the end, made once
  // after a pass without a tree from each placement's own figures: a test binary's
  // profile has millions of paths and a few leaks, whose frames alone are named. Its
  // leaves' live_blocks and live_bytes are exact; their other figures stay 0 (a leaf
  // merges placements whose peaks do not add up). Not with a lifetime filter, whose
  // dropped events still count in the placements (nullptr then).
  const MergedTree* live_tree();
  const MergedTree& bottom_up_tree() const { return bottom_up_; }
  // The kept blocks of no type, neither named nor inferred, by the function that called
  // the allocator (its call site's innermost frame, inlined ones included), most bytes
  // first: in a program built without HeapType that is most of the heap, and who made
  // it is the first thing a reader can follow. Peaks are not summed (0).
  // An allocation wrapper (xmalloc, g_malloc, a program's own operator new: see
  // allocation_wrappers.hpp) is passed over: its callers are named, "f (through xmalloc)".
  std::vector<std::pair<std::string, Figures>> untyped_callers();
  const StringTable& strings() const { return strings_; }
  const CallPaths& call_paths() const { return paths_; }
  const std::deque<Context>& contexts() const { return contexts_; }
  // Every placement met, by (thread, site).
  template <class F>
  void for_each_placement(F&& visit) const {
    for (const auto& entry : placements_)
      for (const Placement& p : entry.second)
        if (p.known) visit(p);
  }
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The FINDING records of the events read, grouped (most frequent first).
  const std::vector<Finding>& findings() const { return findings_; }
  // The timeline of one grouping of options.timelines (nullptr: not followed); with
  // kNone, the first one followed.
  const Timeline* timeline(AnalysisOptions::Series grouping = AnalysisOptions::Series::kNone) const;
  // The blocks live when the pass stopped, by address (options.addresses).
  std::vector<LiveBlock> live_blocks() const;
  const std::vector<BucketSnapshot>& buckets() const { return buckets_; }
  uint64_t clock_tick_ns() const { return tick_ns_; }
  // True when some thread recorded calling-context nodes.
  bool has_call_paths() const;
  // Code addresses the profile holds: functions entered (calling-context nodes) and
  // return addresses (nodes and allocation call sites met so far), each once, sorted.
  void code_addresses(std::vector<uint64_t>* functions, std::vector<uint64_t>* call_sites) const;

  int64_t live_blocks_at(uint32_t thread, uint32_t site) override;

 private:
  // The placement of (thread, site), resolved when first met; nullptr when the profile
  // does not define it. Inline for the thread of the last lookup: one per event.
  Placement* placement(uint32_t thread, uint32_t site) {
    if (thread == cached_thread_ && cached_placements_ && site < cached_placements_->size()) {
      Placement& p = (*cached_placements_)[site];
      if (p.known) return &p;
    }
    return find_placement(thread, site);
  }
  Placement* find_placement(uint32_t thread, uint32_t site);
  bool resolve(uint32_t thread, uint32_t site, Placement* p);
  const format::SiteDef* base_site(uint32_t thread, uint32_t site, uint32_t* base_thread);
  uint32_t context_of(uint32_t thread, uint64_t node, uint64_t call_site);
  uint32_t context_path(uint32_t context);
  bool keeps_context(uint32_t context);
  uint32_t type_group(uint64_t tag, uint32_t context, uint64_t size, uint64_t* objects);
  uint32_t unnamed_function_name(const std::string& row, uint32_t context);
  uint32_t group_for_name(uint32_t name, bool inferred, uint64_t tag);
  void reserve_type_groups();
  uint32_t tag_name(uint64_t tag);
  uint32_t container_group(uint32_t name, bool inferred, uint64_t tag, uint32_t context, uint64_t* objects);
  StorageFrame container_frame_at(const PathFrame& frame, std::string* row);
  uint32_t thread_group(uint32_t thread);
  const InferredType& inferred_at(uint64_t call_site);
  const InferredType* inferred_in(uint32_t context);
  bool reported_member(uint64_t tag, uint32_t context);
  uint64_t block_tag(uint64_t reported, uint32_t context, uint64_t* objects);
  uint32_t function_group(uint32_t name);
  void place_in_trees(Placement* p);
  uint32_t tree_frame(uint32_t context);
  // The node of `path`'s last frame in `tree`, its frames added by name where missing;
  // visit(node, name) for each frame, root first.
  template <class Visit>
  uint32_t add_frames(MergedTree* tree, uint32_t path, Visit&& visit) {
    uint32_t node = 0;
    for (const PathFrame* f : paths_.frames(path)) {
      node = tree->child(node, MergedTree::kFrame, f->name, f->inlined && !f->hooked);
      visit(node, f->name);
    }
    return node;
  }
  uint32_t bottom_leaf(uint32_t context);
  struct UntypedCallerNames {
    std::unordered_map<uint64_t, bool> wrapper_sites;       // call site: its function is a wrapper
    std::unordered_map<uint32_t, std::string> by_context;   // names past a wrapper
  };
  std::string untyped_caller(uint32_t context, UntypedCallerNames* memo);

  bool take(const format::Event& e);
  bool plain_pass() const;
  void take_plain_run(const format::Event* run, size_t count);
  void apply(const format::Event& e);
  void apply_alloc(const format::Event& e);
  void apply_free(const format::Event& e);
  // Aggregated profiles: the counts in place of events (aggregate_analysis.cpp).
  void reserve_for_counted_sites(const format::AggregateCounts& counts);
  void apply_aggregate();
  void apply_site_counts(Placement& p, const format::SiteCounts& counts, uint64_t peak_time);
  void apply_live_counts(Placement& p, const format::SiteCounts& counts, uint64_t peak_time);
  void apply_type_peaks();
  void add_aggregated(Placement& p, const Figures& counts);
  void apply_stack(const format::Event& e);
  void allocate(Placement& p, uint64_t time);
  void release(Placement& p, bool temporary);
  void unallocate(Placement& p);
  void take_back_unmatched_frees();
  void follow_in_timelines(const Placement& p);
  void add_timelines();
  void collect_findings();
  void open_window(uint64_t time);
  void track_address(const format::Event& e);
  void close_bucket(uint64_t time);
  void count_lifetime(uint64_t placement, uint64_t ticks);
  void select_by_lifetime(const ProgressFn& progress);
  void mark_lifetime(const format::Event& e);
  bool dropped_by_lifetime(const format::Event& e);
  bool kept(const Placement& p) const;
  template <class Change>
  void change_groups(Placement& p, Change&& change);
  template <class Change>
  void change_kept_groups(const Placement& p, Change&& change);

  const format::ProfileFile& file_;
  CodeNames* names_;
  AnalysisOptions options_;
  uint64_t tick_ns_;
  EventMerge merge_;
  TemporaryRule temporaries_;  // on the merged order
  StringTable strings_;
  CallPaths paths_;
  MergedTree tree_;
  MergedTree live_tree_;
  bool live_tree_made_ = false;
  MergedTree bottom_up_;
  Totals totals_;
  Figures selected_;
  std::vector<TypeGroup> types_;
  std::vector<TypeHistograms> histograms_;  // by type group, when options_.histograms
  std::vector<FunctionGroup> functions_;
  std::vector<ThreadGroup> threads_;
  std::deque<Context> contexts_;  // grows without copying: millions in a large profile
  std::unordered_map<uint64_t, InferredType> inferred_at_call_site_;
  std::unordered_map<uint32_t, uint32_t> tree_frame_of_path_;   // CallPaths cell -> tree_'s node
  std::unordered_map<uint32_t, uint32_t> bottom_leaf_of_path_;  // -> bottom_up_'s node
  std::unordered_map<uint32_t, std::vector<Placement>> placements_;
  ContextIndex context_index_;  // -> contexts_, by (thread, node, call site)
  std::unordered_map<uint64_t, uint32_t> group_of_tag_;
  std::unordered_set<uint64_t> container_storage_tags_;  // their groups depend on the call path
  std::unordered_map<uint64_t, uint32_t> group_of_name_;    // (name, inferred)
  std::unordered_map<uint32_t, uint32_t> group_of_thread_;
  std::unordered_map<uint32_t, uint32_t> group_of_function_;
  std::unordered_map<uint64_t, uint32_t> function_matches_;  // name -> 0/1, cached
  std::vector<std::string> warnings_;
  std::vector<Finding> findings_;
  uint32_t untyped_label_;
  // One timeline per grouping followed, all fed by the same events.
  struct FollowedTimeline {
    AnalysisOptions::Series grouping;
    Timeline timeline;
  };
  std::vector<FollowedTimeline> timelines_;
  struct LiveAddress {
    uint64_t placement;  // thread << 32 | site
    uint64_t time;       // of its allocation
  };
  std::unordered_map<uint64_t, LiveAddress> live_addresses_;
  bool counting_ = true;  // inside the window
  bool leaves_only_ = false;  // options_.path_leaves without the tree or functions asked
  // The lifetime filter. The first pass marks, per allocation in merged order, whether
  // its block lived within the limits; the second leaves the others out of every
  // group (their blocks still count for the whole profile and for the merge).
  struct Birth {
    uint64_t allocation;  // its number in merged order
    uint64_t time;
  };
  bool marking_lifetimes_ = false;
  std::unordered_map<uint64_t, Birth> births_;  // by address, first pass
  std::vector<bool> lifetime_kept_;             // by allocation number
  uint64_t allocations_seen_ = 0;
  std::unordered_set<uint64_t> dropped_addresses_;  // live blocks the filter leaves out
  bool dropping_event_ = false;                     // the event applied now is one of theirs
  std::vector<BucketSnapshot> buckets_;
  EventObserver* observer_ = nullptr;
  // Hot path: the placements of the thread of the last event.
  // The placements a plain run met, with their figures before it.
  struct RunStart {
    uint32_t thread;
    uint32_t site;
    Figures figures;
  };
  std::vector<RunStart> run_placements_;
  uint64_t run_number_ = 0;
  uint32_t cached_thread_ = 0;
  std::vector<Placement>* cached_placements_ = nullptr;
};

}  // namespace core
}  // namespace heaptype

#endif
