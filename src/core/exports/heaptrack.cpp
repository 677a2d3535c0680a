// heaptrack.cpp: the heaptrack data file writer (see heaptrack.hpp).
#include "heaptrack.hpp"

#include <algorithm>

#include "samples.hpp"

namespace heaptype {
namespace core {
namespace {

constexpr const char* kTypeModule = "(allocated type)";
constexpr size_t kTextPiece = 1 << 20;

// heaptrack's version (1.4.0) and file format (3: strings carry their length).
constexpr const char* kVersionLine = "v 10400 3";

void append_hex(std::string* out, uint64_t value) {
  char digits[16];
  size_t n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value & 0xf];
    value >>= 4;
  } while (value);
  while (n) out->push_back(digits[--n]);
}

std::string hex(uint64_t value) {
  std::string out;
  append_hex(&out, value);
  return out;
}

// One line per string: heaptrack reads up to the end of the line.
std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

}  // namespace

HeaptrackWriter::HeaptrackWriter(const Analysis& analysis, const std::string& command, Sink sink)
    : a_(analysis), sink_(std::move(sink)) {
  line(kVersionLine);
  line("X " + one_line(command));
}

// --- events, kept in a window so that a late type can still rename an allocation ------------

HeaptrackWriter::Info& HeaptrackWriter::info(uint64_t key, const Placement& p) {
  auto it = infos_.find(key);
  if (it != infos_.end()) return it->second;
  Info& made = infos_[key];
  made.size = p.size;
  made.context = p.context;
  made.type_group = p.type_group;
  return made;
}

void HeaptrackWriter::allocated(uint64_t key, const Placement& p, bool selected, uint64_t time) {
  if (!selected) return;
  settle_deferred();
  Info& i = info(key, p);
  ++i.live;
  ++i.lines;
  push(kAllocation, key, time);
}

// A free the file can hold: of a block its stream allocated (a free the merge met ahead
// of its allocation, taken back by the analysis at the end, is left out). A block moved
// here too late to rename its allocation line is freed as what it was allocated as.
void HeaptrackWriter::freed(uint64_t key, const Placement& p, bool selected, uint64_t time) {
  if (!selected) return;
  if (deferred_ && key == deferred_to_) return free_deferred(time);
  settle_deferred();
  Info& i = info(key, p);
  if (i.live > 0) {
    --i.live;
    push(kFree, key, time);
  } else if (!i.borrowed.empty()) {
    uint64_t from = i.borrowed.back();
    i.borrowed.pop_back();
    --infos_.at(from).live;
    push(kFree, from, time);
  }
}

void HeaptrackWriter::moved(uint64_t from, uint64_t to, const Placement& p_to, bool from_selected, bool to_selected,
                            uint64_t time) {
  settle_deferred();
  auto it = infos_.find(from);
  bool in_file = from_selected && it != infos_.end() && it->second.live > 0;
  if (!in_file) {
    if (to_selected) allocated(to, p_to, true, time);  // enters the file now
    return;
  }
  if (!to_selected) {
    if (Pending* line = renamable_allocation(from, to)) {
      line->kind = kDropped;
      --it->second.live;
      --it->second.lines;
    }
    return;
  }
  info(to, p_to);
  Pending* line = renamable_allocation(from, to);
  bool same_thread = (from >> 32) == (to >> 32);
  if (line && line == &pending_.back() && !same_thread) {
    // Typed by another thread just after its allocation: the analysis's rule keeps a
    // free at `to` next no temporary, so the line is renamed unless that free comes.
    deferred_ = line;
    deferred_from_ = from;
    deferred_to_ = to;
  } else if (line) {
    rename(line, from, to);
  } else {
    infos_.at(to).borrowed.push_back(from);
  }
}

void HeaptrackWriter::rename(Pending* line, uint64_t from, uint64_t to) {
  line->value = to;
  Info& f = infos_.at(from);
  Info& t = infos_.at(to);
  --f.live;
  --f.lines;
  ++t.live;
  ++t.lines;
}

void HeaptrackWriter::settle_deferred() {
  if (!deferred_) return;
  rename(deferred_, deferred_from_, deferred_to_);
  deferred_ = nullptr;
  deferred_to_ = kNoKey;
}

// The block typed by another thread just after its allocation is freed next: the line
// pair must name two infos (the analysis sees no temporary), each allocated before the
// free (heaptrack_gui), so: `+ to` and `- from` when another line names `from`, else
// `+ from` and `- to` when a line names `to`; else a temporary too many.
void HeaptrackWriter::free_deferred(uint64_t time) {
  Pending* line = deferred_;
  uint64_t from = deferred_from_, to = deferred_to_;
  deferred_ = nullptr;
  deferred_to_ = kNoKey;
  Info& f = infos_.at(from);
  --f.live;
  if (f.lines > 1) {
    line->value = to;
    --f.lines;
    ++infos_.at(to).lines;
    return push(kFree, from, time);
  }
  push(kFree, infos_.at(to).lines > 0 ? to : from, time);
}

// The latest allocation line of `from` still in the window that can name another info:
// not one whose next event is a free of `from` or `to` (renaming it would make or
// unmake a temporary). nullptr when the window holds none.
HeaptrackWriter::Pending* HeaptrackWriter::renamable_allocation(uint64_t from, uint64_t to) {
  const Pending* next = nullptr;
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (it->kind == kTime || it->kind == kDropped) continue;
    bool frees_either = next && next->kind == kFree && (next->value == from || next->value == to);
    if (it->kind == kAllocation && it->value == from && !frees_either) return &*it;
    next = &*it;
  }
  return nullptr;
}

void HeaptrackWriter::push(Kind kind, uint64_t value, uint64_t time) {
  uint64_t ms = time * a_.clock_tick_ns() / 1000000;
  if (ms > last_ms_) {
    last_ms_ = ms;
    pending_.push_back(Pending{kTime, ms});
  }
  pending_.push_back(Pending{kind, value});
  while (pending_.size() > kWindow) write_oldest();
}

void HeaptrackWriter::write_oldest() {
  Pending e = pending_.front();
  pending_.pop_front();
  switch (e.kind) {
    case kTime:
      event_line('c', e.value);
      break;
    case kAllocation:
      write_allocation(e.value);
      break;
    case kFree:
      write_free(e.value);
      break;
    case kDropped:
      break;
  }
}

void HeaptrackWriter::finish() {
  settle_deferred();
  while (!pending_.empty()) write_oldest();
  release_held();
  uint64_t end_ms = a_.totals().duration * a_.clock_tick_ns() / 1000000;
  if (end_ms > last_ms_) line("c " + hex(end_ms));
  flush_text(true);
}

// --- event lines -----------------------------------------------------------------------------

void HeaptrackWriter::write_allocation(uint64_t key) {
  if (!first_written_) {
    first_written_ = true;
    first_key_ = key;
    line(info_line(infos_.at(key)));
    info_sizes_.push_back(infos_.at(key).size);
    ++infos_written_;
    event_line('+', 0);
    first_live_ = true;
    return;
  }
  uint32_t index = info_index(key);
  if (key == first_key_) ++first_key_others_live_;
  event_line('+', index);
}

void HeaptrackWriter::write_free(uint64_t key) {
  // Blocks of one placement are alike: just after the first block's allocation, any of
  // them is freed as that block (a temporary, as for the analysis).
  if (key == first_key_ && first_live_ && (last_allocation_ == 0 || first_key_others_live_ == 0))
    return write_first_block_free();
  if (key == first_key_) --first_key_others_live_;
  event_line('-', info_index(key));
}

void HeaptrackWriter::write_first_block_free() {
  bool after_free = last_allocation_ == kNone;
  first_live_ = false;
  if (after_free && holding_ && !held_.empty() && held_max_live_ <= peak_before_held_) {
    held_.insert(held_.begin(), "- 0");  // no temporary there; the peak stays
    live_ = Figures::minus(live_, static_cast<int64_t>(info_sizes_[0]));
    last_allocation_ = kNone;
    return release_held();
  }
  release_held();
  event_line('-', 0);  // after a free: heaptrack_print's one temporary too many
}

// An event line; while the first block lives, held back from the last place its free
// could move to: before a line that follows an allocation (not of info 0) and is not
// that allocation's free.
void HeaptrackWriter::event_line(char kind, uint64_t value) {
  bool place = first_live_ && kind != 'c' && last_allocation_ != kNone && last_allocation_ != 0 &&
               !(kind == '-' && value == last_allocation_);
  if (place) {
    release_held();
    holding_ = true;
    peak_before_held_ = peak_;
    held_max_live_ = live_;
  }
  if (kind == '+') {
    live_ = Figures::plus(live_, static_cast<int64_t>(info_sizes_[value]));
    peak_ = std::max(peak_, live_);
    last_allocation_ = static_cast<uint32_t>(value);
  } else if (kind == '-') {
    live_ = Figures::minus(live_, static_cast<int64_t>(info_sizes_[value]));
    last_allocation_ = kNone;
  }
  if (!holding_) {  // the common case, written without a string of its own
    text_ += kind;
    text_ += ' ';
    append_hex(&text_, value);
    text_ += '\n';
    return flush_text(false);
  }
  std::string text(1, kind);
  text += ' ';
  append_hex(&text, value);
  held_.push_back(std::move(text));
  held_max_live_ = std::max(held_max_live_, live_);
  if (held_.size() > kWindow) release_held();  // too long to hold: its free stays where it is
}

void HeaptrackWriter::release_held() {
  holding_ = false;
  for (const std::string& text : held_) line(text);
  held_.clear();
}

// --- definitions, written before their first use ---------------------------------------------

uint32_t HeaptrackWriter::info_index(uint64_t key) {
  Info& i = infos_.at(key);
  if (i.index != kNone) return i.index;
  line(info_line(i));
  info_sizes_.push_back(i.size);
  i.index = infos_written_++;
  return i.index;
}

std::string HeaptrackWriter::info_line(const Info& i) {
  uint32_t trace = trace_of(i.context, i.type_group);
  return "a " + hex(i.size) + " " + hex(trace);
}

// The trace of a call path with the type as its innermost frame.
uint32_t HeaptrackWriter::trace_of(uint32_t context, uint32_t type_group) {
  uint64_t key = static_cast<uint64_t>(context) << 32 | type_group;
  auto it = traces_.find(key);
  if (it != traces_.end()) return it->second;
  std::vector<const PathFrame*> frames = a_.call_paths().frames(a_.contexts()[context].path);
  std::vector<std::vector<const PathFrame*>> groups = frames_by_pc(frames);
  uint32_t trace = 0;
  for (auto g = groups.rbegin(); g != groups.rend(); ++g) trace = trace_node(trace, ip_of(*g));
  trace = trace_node(trace, type_ip(type_group));
  traces_.emplace(key, trace);
  return trace;
}

uint32_t HeaptrackWriter::trace_node(uint32_t parent, uint32_t ip) {
  uint64_t key = static_cast<uint64_t>(parent) << 32 | ip;
  auto it = trace_nodes_.find(key);
  if (it != trace_nodes_.end()) return it->second;
  line("t " + hex(ip) + " " + hex(parent));
  uint32_t index = ++trace_count_;
  trace_nodes_.emplace(key, index);
  return index;
}

uint32_t HeaptrackWriter::ip_of(const std::vector<const PathFrame*>& group) {
  std::string key = location_key(group);
  auto it = ips_.find(key);
  if (it != ips_.end()) return it->second;
  const StringTable& names = a_.strings();
  uint32_t module = group.back()->module;
  std::string text = "i " + hex(group[0]->pc) + " " + hex(module ? string_index(names.get(module)) : 0);
  for (const PathFrame* f : group) {
    text += " " + hex(string_index(names.get(f->name)));
    text += " " + hex(f->file ? string_index(names.get(f->file)) : 0);
    text += " " + hex(f->line);
  }
  line(text);
  uint32_t index = ++ip_count_;
  ips_.emplace(std::move(key), index);
  return index;
}

// The type's frame: the address of its tag (0 when it has none), no file.
uint32_t HeaptrackWriter::type_ip(uint32_t type_group) {
  auto it = type_ips_.find(type_group);
  if (it != type_ips_.end()) return it->second;
  const TypeGroup& type = a_.types()[type_group];
  uint32_t name = string_index(a_.strings().get(type.label));
  line("i " + hex(type.type_tag) + " " + hex(string_index(kTypeModule)) + " " + hex(name) + " 0 0");
  uint32_t index = ++ip_count_;
  type_ips_.emplace(type_group, index);
  return index;
}

// Strings are numbered from 1 in the order of their `s` lines; 0 is "none".
uint32_t HeaptrackWriter::string_index(const std::string& raw) {
  if (raw.empty()) return 0;
  std::string text = one_line(raw);
  auto it = strings_.find(text);
  if (it != strings_.end()) return it->second;
  line("s " + hex(text.size()) + " " + text);
  uint32_t index = static_cast<uint32_t>(strings_.size()) + 1;
  strings_.emplace(std::move(text), index);
  return index;
}

void HeaptrackWriter::line(const std::string& text) {
  text_ += text;
  text_ += '\n';
  flush_text(false);
}

void HeaptrackWriter::flush_text(bool all) {
  if (text_.empty() || (!all && text_.size() < kTextPiece)) return;
  sink_(text_);
  text_.clear();
}

}  // namespace core
}  // namespace heaptype
