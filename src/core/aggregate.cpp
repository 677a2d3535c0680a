#include "aggregate.hpp"

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
};

// A RETYPE or NAME that arrived before its block's allocation in the merge.
struct PendingRetype {
  Event event;
};

inline uint64_t block_key(uint32_t thread, uint64_t number) {
  return (static_cast<uint64_t>(thread) << 40) | (number & ((uint64_t{1} << 40) - 1));
}

class TypeAccounting {
 public:
  TypeAccounting(const std::unordered_map<uint64_t, uint32_t>& groups, Aggregate* out)
      : groups_(groups), out_(out) {
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
        release(key, e.time_us);
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

  void add(uint32_t row, const LiveBlock& b, uint64_t time_us) {
    TypeStats& s = out_->rows[row];
    ++s.allocations;
    s.objects += b.objects;
    s.bytes += b.size;
    s.live_bytes += b.size;
    ++s.live_blocks;
    if (s.live_bytes > s.peak_bytes) {
      s.peak_bytes = s.live_bytes;
      s.peak_time_us = time_us;
    }
  }

  void subtract_live(uint32_t row, uint64_t size) {
    TypeStats& s = out_->rows[row];
    s.live_bytes -= size;
    --s.live_blocks;
  }

  void allocate(uint64_t key, const Event& e) {
    const format::Site& site = *e.site;
    LiveBlock b = {site.size, site.count ? site.count : 1, site.type_tag, row_of(site.type_tag)};
    PendingRetype early;
    if (early_retypes_.erase(key, &early)) apply_type(&b, early.event);
    add(b.row, b, e.time_us);
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
    if (early_frees_.erase(key, nullptr)) {
      subtract_live(b.row, b.size);
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

  void release(uint64_t key, uint64_t time_us) {
    (void)time_us;
    LiveBlock b;
    if (!live_.erase(key, &b)) {
      // Another thread's allocation whose record comes later in the merge.
      early_frees_.insert(key, 1);
      return;
    }
    subtract_live(b.row, b.size);
    close_block(b.size);
  }

  // The type a RETYPE (first type wins, cookie checked) or NAME (always) gives a
  // block, applied to `b`; false when it does not apply.
  bool apply_type(LiveBlock* b, const Event& e) {
    uint64_t count;
    if (e.kind == Event::kName) {
      count = e.count;
    } else {
      if (b->type_tag || !e.elem_size) return false;
      if (e.offset == 0) {
        count = b->size % e.elem_size == 0 ? b->size / e.elem_size : 1;
      } else {
        if (b->size < e.offset || b->size - e.offset != e.count * e.elem_size) return false;
        count = e.count;
      }
    }
    b->type_tag = e.type_tag;
    b->row = row_of(e.type_tag);
    b->objects = count ? count : 1;
    return true;
  }

  void retype(uint64_t key, const Event& e) {
    LiveBlock* b = live_.find(key);
    if (!b) {
      early_retypes_.insert(key, {e});
      return;
    }
    // Move the block from the row it was counted in to its real type.
    LiveBlock before = *b;
    if (!apply_type(b, e)) return;
    TypeStats& old = out_->rows[before.row];
    --old.allocations;
    old.objects -= before.objects;
    old.bytes -= before.size;
    subtract_live(before.row, before.size);
    add(b->row, *b, e.time_us);
  }

  const std::unordered_map<uint64_t, uint32_t>& groups_;
  Aggregate* out_;
  std::unordered_map<uint64_t, uint32_t> rows_of_tag_;
  FlatMap<LiveBlock> live_;
  FlatMap<uint8_t> early_frees_;
  FlatMap<PendingRetype> early_retypes_;
};

// Merges the threads' streams by time; ties go to the lower thread number.
class EventMerge {
 public:
  explicit EventMerge(const format::ProfileFile& file) {
    for (const auto& entry : file.event_chunks())
      streams_.emplace_back(new format::ThreadEvents(entry.first, entry.second));
    for (size_t i = 0; i < streams_.size(); ++i) refill(i);
  }

  bool next(Event* out) {
    if (heap_.empty()) return false;
    Head head = heap_.top();
    heap_.pop();
    *out = head.event;
    pending_index_ = head.stream;
    return true;
  }

  // Call after handling the event returned by next(): the stream moves on. (The
  // event's site pointer stays valid until then.)
  void advance() { refill(pending_index_); }

  void collect_errors(std::vector<std::string>* warnings) const {
    for (const auto& s : streams_)
      if (!s->error().empty()) warnings->push_back("damaged events: " + s->error());
  }

 private:
  struct Head {
    Event event;
    size_t stream;
    bool operator<(const Head& other) const {  // std::priority_queue is a max-heap
      if (event.time_us != other.event.time_us) return event.time_us > other.event.time_us;
      return stream > other.stream;
    }
  };

  void refill(size_t i) {
    Event e;
    if (streams_[i]->next(&e)) heap_.push({e, i});
  }

  std::vector<std::unique_ptr<format::ThreadEvents>> streams_;
  std::priority_queue<Head> heap_;
  size_t pending_index_ = 0;
};

}  // namespace

Aggregate aggregate_by_type(const format::ProfileFile& file,
                            const std::unordered_map<uint64_t, uint32_t>& groups) {
  Aggregate out;
  TypeAccounting accounting(groups, &out);
  EventMerge merge(file);
  Event e;
  while (merge.next(&e)) {
    accounting.on_event(e);
    merge.advance();
  }
  accounting.finish();
  merge.collect_errors(&out.warnings);
  return out;
}

}  // namespace core
}  // namespace heaptype
