#include "aggregate.hpp"

#include <deque>
#include <memory>
#include <queue>

namespace heaptype {
namespace core {
namespace {

using format::Event;
using format::SiteDef;

// Where the blocks of one (thread, site) are counted.
struct Placement {
  bool known = false;
  uint64_t size = 0;
  uint64_t objects = 1;
  uint32_t row = 0;
  uint32_t stats = 0;   // index into context_rows
  int64_t live = 0;     // blocks counted here now (negative: frees ahead of their allocation)
};

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

  void add_stream(const format::ThreadEvents* events) { streams_[events->thread()] = events; }

  void on_event(const Event& e, uint64_t time_us) {
    out_->totals.duration_us = time_us;
    switch (e.kind) {
      case Event::kAlloc:
        allocate(placement(e.stream, e.site), time_us);
        break;
      case Event::kFree:
        release(e.thread, e.site);
        break;
      case Event::kMove:
        move(e.thread, e.site, e.stream, e.new_site, time_us);
        break;
    }
  }

  void finish() {
    uint64_t unmatched = 0;
    for (auto& thread : placements_)
      for (Placement& p : thread.second)
        if (p.live < 0) unmatched += static_cast<uint64_t>(-p.live);
    out_->totals.unmatched_frees += unmatched;
    if (unmatched)
      out_->warnings.push_back(std::to_string(unmatched) + " frees refer to allocations missing from the profile");
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

  uint32_t context_of(uint32_t thread, uint64_t node, uint64_t call_site) {
    uint64_t key = (static_cast<uint64_t>(thread) << 40) ^ (node << 20) ^ call_site;
    auto range = contexts_.equal_range(key);
    for (auto it = range.first; it != range.second; ++it) {
      const Context& c = out_->contexts[it->second];
      if (c.thread == thread && c.node == node && c.call_site == call_site) return it->second;
    }
    uint32_t id = static_cast<uint32_t>(out_->contexts.size());
    out_->contexts.push_back({thread, node, call_site});
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

  // The site a (possibly derived) site takes its size and context from.
  const SiteDef* base_of(uint32_t thread, uint32_t site, uint32_t* base_thread) {
    for (int hops = 0; hops < 64; ++hops) {
      auto it = streams_.find(thread);
      if (it == streams_.end() || site >= it->second->sites().size()) return nullptr;
      const SiteDef& def = it->second->sites()[site];
      if (!def.derived) {
        *base_thread = thread;
        return &def;
      }
      thread = def.base_thread;
      site = def.base_site;
    }
    return nullptr;
  }

  Placement* placement(uint32_t thread, uint32_t site) {
    std::vector<Placement>& list = placements_[thread];
    if (site >= list.size()) {
      auto it = streams_.find(thread);
      if (it == streams_.end() || site >= it->second->sites().size()) return nullptr;
      list.resize(it->second->sites().size());
    }
    Placement& p = list[site];
    if (p.known) return &p;
    const SiteDef& def = streams_[thread]->sites()[site];
    uint32_t base_thread = 0;
    const SiteDef* base = base_of(thread, site, &base_thread);
    if (!base) return nullptr;
    p.known = true;
    p.size = base->site.size;
    p.objects = def.site.count ? def.site.count : 1;
    p.row = row_of(def.site.type_tag);
    p.stats = stats_of(context_of(base_thread, base->site.node, base->site.call_site), p.row);
    return &p;
  }

  void add(Placement& p, uint64_t time_us) {
    TypeStats& s = out_->rows[p.row];
    ++s.allocations;
    s.objects += p.objects;
    s.bytes += p.size;
    s.live_bytes += p.size;
    ++s.live_blocks;
    if (s.live_bytes > s.peak_bytes) {
      s.peak_bytes = s.live_bytes;
      s.peak_time_us = time_us;
    }
    ContextStats& c = out_->context_rows[p.stats];
    ++c.allocations;
    c.objects += p.objects;
    c.bytes += p.size;
    c.live_bytes += p.size;
    ++c.live_blocks;
    if (c.live_bytes > c.peak_bytes) c.peak_bytes = c.live_bytes;
    ++p.live;
  }

  void subtract_live(Placement& p) {
    TypeStats& s = out_->rows[p.row];
    s.live_bytes -= p.size;
    --s.live_blocks;
    out_->context_rows[p.stats].live_bytes -= p.size;
    --out_->context_rows[p.stats].live_blocks;
    --p.live;
  }

  void subtract_allocation(Placement& p) {
    TypeStats& s = out_->rows[p.row];
    --s.allocations;
    s.objects -= p.objects;
    s.bytes -= p.size;
    ContextStats& c = out_->context_rows[p.stats];
    --c.allocations;
    c.objects -= p.objects;
    c.bytes -= p.size;
    subtract_live(p);
  }

  void allocate(Placement* p, uint64_t time_us) {
    if (!p) return;
    add(*p, time_us);
    Totals& t = out_->totals;
    ++t.allocations;
    t.bytes += p->size;
    t.live_bytes += p->size;
    ++t.live_blocks;
    if (t.live_bytes > t.peak_bytes) {
      t.peak_bytes = t.live_bytes;
      t.peak_time_us = time_us;
    }
    if (t.live_blocks > t.peak_live_blocks) t.peak_live_blocks = t.live_blocks;
  }

  void release(uint32_t thread, uint32_t site) {
    Placement* p = placement(thread, site);
    if (!p) {
      ++out_->totals.unmatched_frees;
      return;
    }
    subtract_live(*p);
    Totals& t = out_->totals;
    ++t.frees;
    t.live_bytes -= p->size;
    --t.live_blocks;
  }

  void move(uint32_t thread, uint32_t site, uint32_t new_thread, uint32_t new_site, uint64_t time_us) {
    Placement* from = placement(thread, site);
    Placement* to = placement(new_thread, new_site);
    if (!from || !to) return;
    subtract_allocation(*from);
    add(*to, time_us);
  }

  Aggregate* out_;
  std::unordered_map<uint32_t, const format::ThreadEvents*> streams_;
  std::unordered_map<uint32_t, std::vector<Placement>> placements_;
  std::unordered_map<uint64_t, uint32_t> rows_of_tag_;
  std::unordered_multimap<uint64_t, uint32_t> contexts_;
  std::unordered_map<uint64_t, uint32_t> stats_index_;
};

// One thread's events with a short lookahead. A block whose constructor allocates
// is allocated untyped and moved to its typed site a few events later; folding the
// MOVE into the allocation counts the block under its type from the start, so no
// row's peak sees it twice.
class LookaheadStream {
 public:
  static constexpr size_t kLookahead = 256;

  LookaheadStream(const format::ProfileFile& file, uint32_t thread) : events_(file, thread) { fill(); }

  bool empty() const { return queue_.empty(); }
  const Event& front() const { return queue_.front(); }
  void pop() {
    if (queue_.front().kind == Event::kMove) --moves_;
    queue_.pop_front();
    fill();
  }
  const format::ThreadEvents& events() const { return events_; }

 private:
  void fill() {
    Event e;
    while (queue_.size() < kLookahead && events_.next(&e)) {
      if (e.kind == Event::kMove) ++moves_;
      queue_.push_back(e);
    }
    if (!queue_.empty() && moves_) fold_move(queue_.front());
  }

  // ALLOC(site A) ... MOVE(this thread, A -> B) with no free at A between them:
  // the moved block is the one allocated.
  void fold_move(Event& alloc) {
    if (alloc.kind != Event::kAlloc) return;
    for (auto it = queue_.begin() + 1; it != queue_.end(); ++it) {
      if (it->thread != alloc.stream || it->site != alloc.site) continue;
      if (it->kind == Event::kAlloc || it->kind == Event::kFree) return;
      alloc.site = it->new_site;
      queue_.erase(it);
      --moves_;
      return;
    }
  }

  format::ThreadEvents events_;
  std::deque<Event> queue_;
  size_t moves_ = 0;
};

// Merges the threads' streams by time; ties go to the lower thread number.
class EventMerge {
 public:
  explicit EventMerge(const format::ProfileFile& file) {
    for (const auto& entry : file.event_chunks())
      streams_.emplace_back(new LookaheadStream(file, entry.first));
    for (size_t i = 0; i < streams_.size(); ++i)
      if (!streams_[i]->empty()) heap_.push({streams_[i]->front().time, i});
  }

  void register_streams(TypeAccounting* accounting) const {
    for (const auto& s : streams_) accounting->add_stream(&s->events());
  }

  bool next(Event* out) {
    if (heap_.empty()) return false;
    size_t i = heap_.top().stream;
    heap_.pop();
    *out = streams_[i]->front();
    streams_[i]->pop();
    if (!streams_[i]->empty()) heap_.push({streams_[i]->front().time, i});
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
    uint64_t time;
    size_t stream;
    bool operator<(const Head& other) const {  // std::priority_queue is a max-heap
      if (time != other.time) return time > other.time;
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
  merge.register_streams(&accounting);
  uint64_t tick_ns = file.header().clock_tick_ns ? file.header().clock_tick_ns : 1000;
  Event e;
  while (merge.next(&e)) accounting.on_event(e, e.time * tick_ns / 1000);
  accounting.finish();
  merge.finish(&out);
  return out;
}

}  // namespace core
}  // namespace heaptype
