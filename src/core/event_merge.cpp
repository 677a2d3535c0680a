#include "event_merge.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace heaptype {
namespace core {

using format::Event;

LookaheadStream::LookaheadStream(const format::ProfileFile& file, uint32_t thread)
    : events_(file, thread), ring_(kCapacity), folded_(kCapacity, 0), plain_(kCapacity, 0) {
  fill();
  if (moves_ && size_) fold_move();
}

// Decodes into the free slots, a contiguous stretch of the ring at a time.
void LookaheadStream::fill() {
  while (!exhausted_ && size_ < kCapacity) {
    size_t tail = (head_ + size_) & kMask;
    size_t room = std::min(kCapacity - size_, kCapacity - tail);
    size_t got = events_.next_batch(&ring_[tail], room, &plain_[tail]);
    // Moves are among the other events: only those are looked at.
    for (size_t i = tail; i < tail + got; ++i) {
      const void* other = std::memchr(&plain_[i], 0, tail + got - i);
      if (!other) break;
      i = static_cast<size_t>(static_cast<const uint8_t*>(other) - plain_.data());
      if (ring_[i].kind == Event::kMove) {
        ++moves_;
        ++moves_from_[site_key(ring_[i].thread, ring_[i].site)];
      }
    }
    size_ += got;
    if (got < room) exhausted_ = true;
  }
}

void LookaheadStream::forget_move(const Event& move) {
  --moves_;
  auto it = moves_from_.find(site_key(move.thread, move.site));
  if (it != moves_from_.end() && --it->second == 0) moves_from_.erase(it);
}

// ALLOC(site A) ... MOVE(this thread's A -> B) with no other event at A between
// them, within the lookahead: the moved block is the one just allocated. So is a
// MOVE(B -> C) after it with no other event at B between: a block typed for a
// moment by its first member's report and back by its new-expression's own (the
// runtime's "contested" call site type) is counted at C from the start, and never
// adds to B's peak.
void LookaheadStream::fold_move() {
  Event& alloc = at(0);
  if (alloc.kind != Event::kAlloc) return;
  size_t limit = size_ < kLookahead ? size_ : kLookahead;
  size_t i = 1;
  while (moves_from_.find(site_key(alloc.stream, alloc.site)) != moves_from_.end()) {  // else nothing to fold
    for (;; ++i) {
      if (i >= limit) return;
      size_t slot = (head_ + i) & kMask;
      const Event& e = ring_[slot];
      if (folded_[slot] || e.thread != alloc.stream || e.site != alloc.site) continue;
      if (e.kind != Event::kMove || alloc.address != e.address) return;  // address mode: another block
      alloc.site = e.new_site;
      folded_[slot] = 1;
      forget_move(e);
      break;
    }
  }
}

// With no move in the ring, fold_move would fold nothing into these allocations. An
// allocation looks `kLookahead` events ahead when it comes to the front, and a move
// decoded later could be within its reach: a run ends where its events' lookahead
// is not decoded yet (unless the stream has nothing more).
size_t LookaheadStream::plain_run(uint64_t until, bool at_until) const {
  if (moves_ || size_ == 0) return 0;
  size_t limit = exhausted_ ? size_ : size_ >= kLookahead ? size_ - (kLookahead - 1) : 0;
  limit = std::min(limit, kCapacity - head_);
  // A folded slot holds a MOVE: never plain.
  const void* other = std::memchr(&plain_[head_], 0, limit);
  size_t n = other ? static_cast<size_t>(static_cast<const uint8_t*>(other) - &plain_[head_]) : limit;
  if (until == std::numeric_limits<uint64_t>::max() && at_until) return n;  // no other stream waits
  // A stream's times never decrease.
  const Event* e = &ring_[head_];
  auto before = [](const Event& x, uint64_t t) { return x.time < t; };
  auto after = [](uint64_t t, const Event& x) { return t < x.time; };
  const Event* end = at_until ? std::upper_bound(e, e + n, until, after) : std::lower_bound(e, e + n, until, before);
  return static_cast<size_t>(end - e);
}

void LookaheadStream::skip_plain(size_t count) {
  head_ = (head_ + count) & kMask;
  size_ -= count;
  if (size_ < kLookahead) fill();
  while (size_ && folded_[head_]) {  // as pop() leaves it
    folded_[head_] = 0;
    head_ = (head_ + 1) & kMask;
    --size_;
    if (size_ < kLookahead) fill();
  }
  if (moves_ && size_) fold_move();
}

EventMerge::EventMerge(const format::ProfileFile& file, BlockLedger* ledger) : ledger_(ledger) {
  for (const auto& entry : file.event_chunks()) {
    stream_of_thread_[entry.first] = streams_.size();
    threads_.push_back(entry.first);
    streams_.emplace_back(new LookaheadStream(file, entry.first));
  }
  force_next_.assign(streams_.size(), false);
  for (size_t i = 0; i < streams_.size(); ++i) push(i);
  while (!just_finished_.empty()) just_finished_.pop_back();  // empty from the start: nothing waits
}

void EventMerge::push(size_t stream) {
  if (streams_[stream]->empty()) {
    // Its last event is applied after next() returns it: waiters go on then.
    just_finished_.push_back(threads_[stream]);
    return;
  }
  heap_.push({streams_[stream]->front().time, threads_[stream], stream});
}

const format::ThreadEvents* EventMerge::stream_of(uint32_t thread) const {
  auto it = stream_of_thread_.find(thread);
  return it == stream_of_thread_.end() ? nullptr : &streams_[it->second]->events();
}

std::vector<const format::ThreadEvents*> EventMerge::streams() const {
  std::vector<const format::ThreadEvents*> out;
  for (const auto& s : streams_) out.push_back(&s->events());
  return out;
}

uint64_t EventMerge::bytes_done() const {
  uint64_t done = 0;
  for (const auto& s : streams_) done += s->events().bytes_done();
  return done;
}

bool EventMerge::must_wait(const Event& e, size_t stream) {
  if (e.kind == Event::kAlloc) return false;
  if (force_next_[stream]) {  // it waited for an allocation that will not come first
    force_next_[stream] = false;
    return false;
  }
  // A free of the thread's own site is always possible; with none live, another
  // thread's free of that site went first within the same tick. Counting it now
  // keeps every count exact.
  if (e.thread == e.stream) return false;
  if (ledger_->live_blocks_at(e.thread, e.site) > 0) return false;
  auto owner = stream_of_thread_.find(e.thread);
  bool owner_may_allocate = owner != stream_of_thread_.end() && !streams_[owner->second]->empty();
  if (!owner_may_allocate) return false;
  parked_[key(e.thread, e.site)].push_back(stream);
  ++parked_count_;
  return true;
}

void EventMerge::wake_parked(uint32_t thread, uint32_t site) {
  auto it = parked_.find(key(thread, site));
  if (it == parked_.end()) return;
  std::vector<size_t> woken;
  woken.swap(it->second);
  parked_.erase(it);
  parked_count_ -= woken.size();
  for (size_t stream : woken) push(stream);
}

// A thread whose stream ended allocates nothing more: whoever waits for one of its
// sites waits for a block the profile does not hold.
void EventMerge::release_waiters_of(uint32_t thread) {
  if (!parked_count_) return;
  std::vector<size_t> released;
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (static_cast<uint32_t>(it->first >> 32) == thread) {
      released.insert(released.end(), it->second.begin(), it->second.end());
      it = parked_.erase(it);
    } else {
      ++it;
    }
  }
  parked_count_ -= released.size();
  for (size_t stream : released) {
    force_next_[stream] = true;
    push(stream);
  }
}

// Every stream is parked on another. Within one tick a free may have been counted
// against another block of the same site (sites, not blocks, are named), taking the
// live block another free waits for. The earliest parked event goes on (on a tie, the
// lower-numbered thread's, as in the heap: the order does not depend on the hash map's):
// counts stay exact, and what no allocation ever matches is found at the end.
bool EventMerge::force_one_parked() {
  size_t best = streams_.size();
  uint64_t best_key = 0;
  auto earlier = [this](size_t a, size_t b) {
    uint64_t ta = streams_[a]->front().time, tb = streams_[b]->front().time;
    return ta != tb ? ta < tb : threads_[a] < threads_[b];
  };
  for (const auto& entry : parked_) {
    for (size_t stream : entry.second) {
      if (best == streams_.size() || earlier(stream, best)) {
        best = stream;
        best_key = entry.first;
      }
    }
  }
  if (best == streams_.size()) return false;
  std::vector<size_t>& list = parked_[best_key];
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == best) {
      list.erase(list.begin() + static_cast<long>(i));
      break;
    }
  }
  if (list.empty()) parked_.erase(best_key);
  --parked_count_;
  force_next_[best] = true;
  push(best);
  return true;
}

// The current stream goes on while its front comes before every other stream's.
void EventMerge::settle_current() {
  if (current_ != kNoStream) {
    LookaheadStream& s = *streams_[current_];
    if (s.empty()) {
      just_finished_.push_back(threads_[current_]);
      current_ = kNoStream;
    } else if (!heap_.empty()) {
      Head mine{s.front().time, threads_[current_], current_};
      if (heap_.top() < mine) return;  // std::priority_queue order: mine comes first
      heap_.push(mine);
      current_ = kNoStream;
    } else {
      return;
    }
  }
  while (!just_finished_.empty()) {
    uint32_t thread = just_finished_.back();
    just_finished_.pop_back();
    release_waiters_of(thread);
  }
  if (heap_.empty() && !force_one_parked()) return;
  if (heap_.empty()) return;
  current_ = heap_.top().stream;
  heap_.pop();
}

size_t EventMerge::next_run(const Event** run) {
  settle_current();
  if (current_ == kNoStream || parked_count_ || force_next_[current_] || !just_finished_.empty()) return 0;
  uint64_t until = std::numeric_limits<uint64_t>::max();
  bool at_until = true;
  if (!heap_.empty()) {  // the current stream goes first up to the next stream's front
    until = heap_.top().time;
    at_until = threads_[current_] < heap_.top().thread;
  }
  LookaheadStream& s = *streams_[current_];
  *run = &s.front();
  return s.plain_run(until, at_until);
}

bool EventMerge::next(Event* out) {
  for (;;) {
    settle_current();
    if (current_ == kNoStream) {
      if (heap_.empty() && parked_count_ == 0) return false;
      continue;
    }
    LookaheadStream& s = *streams_[current_];
    if (must_wait(s.front(), current_)) {
      current_ = kNoStream;
      continue;
    }
    *out = s.front();
    s.pop();
    return true;
  }
}

}  // namespace core
}  // namespace heaptype
