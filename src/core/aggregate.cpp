#include "aggregate.hpp"

#include <deque>
#include <memory>
#include <queue>

#include "flat_map.hpp"

namespace heaptype {
namespace core {
namespace {

using format::Event;

struct LiveBlock {
  uint64_t size;
  uint64_t objects;
  uint64_t type_tag;
  uint32_t row;
  uint32_t stats;  // index into context_rows
};

// A RETYPE or NAME that arrived before its block's allocation in the merge.
struct PendingRetype {
  Event event;
};

inline uint64_t block_key(uint32_t thread, uint64_t number) {
  return (static_cast<uint64_t>(thread) << 40) | (number & ((uint64_t{1} << 40) - 1));
}

// The object count a RETYPE or NAME gives a block of `size` bytes whose current
// type is `type_tag`; false when it does not apply (RETYPE: the first type wins,
// and an array cookie must agree with the block's size).
bool type_change_count(uint64_t size, uint64_t type_tag, const Event& e, uint64_t* count) {
  if (e.kind == Event::kName) {
    *count = e.count ? e.count : 1;
    return true;
  }
  if (type_tag || !e.elem_size) return false;
  if (e.offset == 0) {
    *count = size % e.elem_size == 0 ? size / e.elem_size : 1;
    return true;
  }
  if (size < e.offset || size - e.offset != e.count * e.elem_size) return false;
  *count = e.count ? e.count : 1;
  return true;
}

class TypeAccounting {
 public:
  TypeAccounting(const std::unordered_map<uint64_t, uint32_t>& groups, Aggregate* out) : out_(out) {
    uint32_t rows = 0;
    for (const auto& g : groups) rows = std::max(rows, g.second + 1);
    out_->rows.resize(rows);
    for (const auto& g : groups) {
      rows_of_tag_[g.first] = g.second;
      if (!out_->rows[g.second].type_tag) out_->rows[g.second].type_tag = g.first;
    }
  }

  void on_event(const Event& e) {
    out_->totals.duration_us = e.time_us;
    uint64_t key = block_key(e.thread, e.number);
    switch (e.kind) {
      case Event::kAlloc:
        allocate(key, e);
        break;
      case Event::kFree:
        release(key);
        break;
      case Event::kRetype:
      case Event::kName:
        retype(key, e);
        break;
    }
  }

  void finish() {
    out_->totals.unmatched_frees += early_frees_.size();
    if (!early_frees_.size()) return;
    out_->warnings.push_back(std::to_string(early_frees_.size()) +
                             " frees refer to allocations missing from the profile");
  }

 private:
  uint32_t row_of(uint64_t type_tag) {
    auto it = rows_of_tag_.find(type_tag);
    if (it != rows_of_tag_.end()) return it->second;
    uint32_t row = static_cast<uint32_t>(out_->rows.size());
    out_->rows.emplace_back();
    out_->rows[row].type_tag = type_tag;
    rows_of_tag_.emplace(type_tag, row);
    return row;
  }

  uint32_t context_of(uint32_t thread, const format::Site& site) {
    uint64_t key = (static_cast<uint64_t>(thread) << 40) ^ (site.node << 20) ^ site.call_site;
    auto range = contexts_.equal_range(key);
    for (auto it = range.first; it != range.second; ++it) {
      const Context& c = out_->contexts[it->second];
      if (c.thread == thread && c.node == site.node && c.call_site == site.call_site) return it->second;
    }
    uint32_t id = static_cast<uint32_t>(out_->contexts.size());
    out_->contexts.push_back({thread, site.node, site.call_site});
    contexts_.emplace(key, id);
    return id;
  }

  uint32_t stats_of(uint32_t context, uint32_t row) {
    uint64_t key = (static_cast<uint64_t>(context) << 32) | row;
    auto it = stats_index_.find(key);
    if (it != stats_index_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(out_->context_rows.size());
    ContextStats s;
    s.context = context;
    s.row = row;
    out_->context_rows.push_back(s);
    stats_index_.emplace(key, id);
    return id;
  }

  void add(const LiveBlock& b, uint64_t time_us) {
    TypeStats& s = out_->rows[b.row];
    ++s.allocations;
    s.objects += b.objects;
    s.bytes += b.size;
    s.live_bytes += b.size;
    ++s.live_blocks;
    if (s.live_bytes > s.peak_bytes) {
      s.peak_bytes = s.live_bytes;
      s.peak_time_us = time_us;
    }
    ContextStats& c = out_->context_rows[b.stats];
    ++c.allocations;
    c.objects += b.objects;
    c.bytes += b.size;
    c.live_bytes += b.size;
    ++c.live_blocks;
    if (c.live_bytes > c.peak_bytes) c.peak_bytes = c.live_bytes;
  }

  void subtract_live(const LiveBlock& b) {
    TypeStats& s = out_->rows[b.row];
    s.live_bytes -= b.size;
    --s.live_blocks;
    out_->context_rows[b.stats].live_bytes -= b.size;
    --out_->context_rows[b.stats].live_blocks;
  }

  void subtract_allocation(const LiveBlock& b) {
    TypeStats& s = out_->rows[b.row];
    --s.allocations;
    s.objects -= b.objects;
    s.bytes -= b.size;
    ContextStats& c = out_->context_rows[b.stats];
    --c.allocations;
    c.objects -= b.objects;
    c.bytes -= b.size;
    subtract_live(b);
  }

  // Row and figures slot of an allocation at this thread's site: computed once per
  // site (a site fixes context and type) unless a folded RETYPE changed the type.
  struct SiteCache {
    uint32_t row = 0, stats = 0;
    bool known = false;
  };

  void place(const Event& e, LiveBlock* b) {
    if (e.thread >= site_cache_.size()) site_cache_.resize(e.thread + 1);
    std::vector<SiteCache>& sites = site_cache_[e.thread];
    if (e.site_number >= sites.size()) sites.resize(e.site_number + 1);
    SiteCache& cached = sites[e.site_number];
    bool folded = e.type_tag != e.site->type_tag;
    if (cached.known && !folded) {
      b->row = cached.row;
      b->stats = cached.stats;
      return;
    }
    b->row = row_of(e.type_tag);
    b->stats = stats_of(context_of(e.thread, *e.site), b->row);
    if (!folded) cached = {b->row, b->stats, true};
  }

  void allocate(uint64_t key, const Event& e) {
    LiveBlock b = {e.site->size, e.count ? e.count : 1, e.type_tag, 0, 0};
    place(e, &b);
    PendingRetype early;
    if (early_retypes_.size() && early_retypes_.erase(key, &early)) {
      uint64_t count;
      if (type_change_count(b.size, b.type_tag, early.event, &count)) {
        uint32_t context = out_->context_rows[b.stats].context;
        b.type_tag = early.event.type_tag;
        b.row = row_of(b.type_tag);
        b.objects = count;
        b.stats = stats_of(context, b.row);
      }
    }
    add(b, e.time_us);
    Totals& t = out_->totals;
    ++t.allocations;
    t.bytes += b.size;
    t.live_bytes += b.size;
    ++t.live_blocks;
    if (t.live_bytes > t.peak_bytes) {
      t.peak_bytes = t.live_bytes;
      t.peak_time_us = e.time_us;
    }
    if (t.live_blocks > t.peak_live_blocks) t.peak_live_blocks = t.live_blocks;
    if (early_frees_.size() && early_frees_.erase(key, nullptr)) {
      subtract_live(b);
      close_block(b.size);
      return;
    }
    live_.insert(key, b);
  }

  void close_block(uint64_t size) {
    Totals& t = out_->totals;
    ++t.frees;
    t.live_bytes -= size;
    --t.live_blocks;
  }

  void release(uint64_t key) {
    LiveBlock b;
    if (!live_.erase(key, &b)) {
      // Another thread's allocation whose record comes later in the merge.
      early_frees_.insert(key, 1);
      return;
    }
    subtract_live(b);
    close_block(b.size);
  }

  void retype(uint64_t key, const Event& e) {
    LiveBlock* b = live_.find(key);
    if (!b) {
      early_retypes_.insert(key, {e});
      return;
    }
    uint64_t count;
    if (!type_change_count(b->size, b->type_tag, e, &count)) return;
    // Move the block from the row it was counted in to its real type.
    subtract_allocation(*b);
    uint32_t context = out_->context_rows[b->stats].context;
    b->type_tag = e.type_tag;
    b->row = row_of(e.type_tag);
    b->objects = count;
    b->stats = stats_of(context, b->row);
    add(*b, e.time_us);
  }

  Aggregate* out_;
  std::vector<std::vector<SiteCache>> site_cache_;  // [thread][site number]
  std::unordered_map<uint64_t, uint32_t> rows_of_tag_;
  std::unordered_multimap<uint64_t, uint32_t> contexts_;
  std::unordered_map<uint64_t, uint32_t> stats_index_;
  FlatMap<LiveBlock> live_;
  FlatMap<uint8_t> early_frees_;
  FlatMap<PendingRetype> early_retypes_;
};

// One thread's events with a short lookahead. A block whose constructor allocates
// is committed untyped and named by a RETYPE a few events later; folding that
// RETYPE into the allocation counts the block under its type from the start, so
// no row's peak sees it twice.
class LookaheadStream {
 public:
  static constexpr size_t kLookahead = 256;

  LookaheadStream(uint32_t thread, const std::vector<format::ChunkRef>& chunks) : events_(thread, chunks) {
    fill();
  }

  bool empty() const { return queue_.empty(); }
  const Event& front() const { return queue_.front(); }
  void pop() {
    if (is_type_change(queue_.front())) --type_changes_;
    queue_.pop_front();
    fill();
  }
  const format::ThreadEvents& events() const { return events_; }

 private:
  static bool is_type_change(const Event& e) { return e.kind == Event::kRetype || e.kind == Event::kName; }

  void fill() {
    Event e;
    while (queue_.size() < kLookahead && events_.next(&e)) {
      if (is_type_change(e)) ++type_changes_;
      queue_.push_back(e);
    }
    if (!queue_.empty() && type_changes_) fold_retype(queue_.front());
  }

  void fold_retype(Event& alloc) {
    if (alloc.kind != Event::kAlloc || alloc.type_tag) return;
    for (auto it = queue_.begin() + 1; it != queue_.end(); ++it) {
      if (it->thread != alloc.thread || it->number != alloc.number) continue;
      if (it->kind == Event::kFree) return;  // freed untyped
      if (it->kind != Event::kRetype && it->kind != Event::kName) continue;
      uint64_t count;
      if (type_change_count(alloc.site->size, 0, *it, &count)) {
        alloc.type_tag = it->type_tag;
        alloc.count = count;
        queue_.erase(it);
        --type_changes_;
      }
      return;
    }
  }

  format::ThreadEvents events_;
  std::deque<Event> queue_;
  size_t type_changes_ = 0;  // RETYPE and NAME events in queue_
};

// Merges the threads' streams by time; ties go to the lower thread number.
class EventMerge {
 public:
  explicit EventMerge(const format::ProfileFile& file) {
    for (const auto& entry : file.event_chunks())
      streams_.emplace_back(new LookaheadStream(entry.first, entry.second));
    for (size_t i = 0; i < streams_.size(); ++i)
      if (!streams_[i]->empty()) heap_.push({streams_[i]->front().time_us, i});
  }

  bool next(Event* out) {
    if (streams_.size() == 1) {  // one thread: nothing to merge
      LookaheadStream& only = *streams_[0];
      if (only.empty()) return false;
      *out = only.front();
      only.pop();
      return true;
    }
    if (heap_.empty()) return false;
    size_t i = heap_.top().stream;
    heap_.pop();
    *out = streams_[i]->front();
    streams_[i]->pop();
    if (!streams_[i]->empty()) heap_.push({streams_[i]->front().time_us, i});
    return true;
  }

  void finish(Aggregate* out) const {
    for (const auto& s : streams_) {
      const format::ThreadEvents& events = s->events();
      if (!events.error().empty()) out->warnings.push_back("damaged events: " + events.error());
      out->nodes[events.thread()] = events.nodes();
    }
  }

 private:
  struct Head {
    uint64_t time_us;
    size_t stream;
    bool operator<(const Head& other) const {  // std::priority_queue is a max-heap
      if (time_us != other.time_us) return time_us > other.time_us;
      return stream > other.stream;
    }
  };

  std::vector<std::unique_ptr<LookaheadStream>> streams_;
  std::priority_queue<Head> heap_;
};

}  // namespace

Aggregate aggregate_by_type(const format::ProfileFile& file,
                            const std::unordered_map<uint64_t, uint32_t>& groups) {
  Aggregate out;
  TypeAccounting accounting(groups, &out);
  EventMerge merge(file);
  Event e;
  while (merge.next(&e)) accounting.on_event(e);
  accounting.finish();
  merge.finish(&out);
  return out;
}

}  // namespace core
}  // namespace heaptype
