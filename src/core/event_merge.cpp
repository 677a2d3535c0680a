#include "event_merge.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace heaptype {
namespace core {

using format::Event;

LookaheadStream::LookaheadStream(const format::ProfileFile& file, uint32_t thread, DecodeAhead* ahead)
    : events_(file, thread),
      ahead_(ahead),
      capacity_(ahead ? kAheadCapacity : kCapacity),
      mask_(capacity_ - 1),
      ring_(capacity_),
      folded_(capacity_, 0) {}

void LookaheadStream::start() {
  fill();
  if (moves_ && size_) fold_move();
}

// A slot just decoded: counted for folding moves.
void LookaheadStream::note_decoded(size_t slot) {
  folded_[slot] = 0;
  const Event& e = ring_[slot];
  if (e.kind == Event::kMove) {
    ++moves_;
    ++moves_from_[site_key(e.thread, e.site)];
  }
}

// Decodes into the free slots, a contiguous stretch of the ring at a time; or, decoded
// ahead, gives slots back and takes what the other thread decoded, waiting while fewer
// than kLookahead events are at hand and more are to come.
void LookaheadStream::fill() {
  if (ahead_) return take_decoded();
  while (!exhausted_ && size_ < capacity_) {
    size_t tail = (head_ + size_) & mask_;
    size_t room = std::min(capacity_ - size_, capacity_ - tail);
    size_t got = events_.next_batch(&ring_[tail], room);
    for (size_t i = tail; i < tail + got; ++i) note_decoded(i);
    size_ += got;
    if (got < room) exhausted_ = true;
  }
}

void LookaheadStream::take_decoded() {
  released_.store(taken_ - size_);
  ahead_->room_made();
  for (;;) {
    bool all = decoded_all_.load();
    uint64_t produced = produced_.load();
    for (uint64_t i = taken_; i < produced; ++i) note_decoded(static_cast<size_t>(i & mask_));
    size_ += static_cast<size_t>(produced - taken_);
    taken_ = produced;
    if (all || ahead_->stopped()) {
      exhausted_ = true;
      return;
    }
    if (size_ >= kLookahead) return;
    ahead_->wait_for(*this);
  }
}

bool LookaheadStream::decoded_more() const { return decoded_all_.load() || produced_.load() > taken_; }

bool LookaheadStream::room_to_decode() const {
  return !decoded_all_.load() && capacity_ - (produced_.load() - released_.load()) >= kAheadBatch;
}

bool LookaheadStream::decode_ahead() {
  if (!room_to_decode()) return false;
  uint64_t produced = produced_.load();
  size_t tail = static_cast<size_t>(produced & mask_);
  size_t count = std::min(kAheadBatch, capacity_ - tail);  // room_to_decode: at least kAheadBatch free
  size_t got = events_.next_batch(&ring_[tail], count);
  produced_.store(produced + got);
  if (got < count) decoded_all_.store(true);
  return true;
}

void LookaheadStream::forget_move(const Event& move) {
  --moves_;
  auto it = moves_from_.find(site_key(move.thread, move.site));
  if (it != moves_from_.end() && --it->second == 0) moves_from_.erase(it);
}

// ALLOC(site A) ... MOVE(this thread's A -> B) with no other event at A between
// them, within the lookahead: the moved block is the one just allocated.
void LookaheadStream::fold_move() {
  Event& alloc = at(0);
  if (alloc.kind != Event::kAlloc) return;
  if (moves_from_.find(site_key(alloc.stream, alloc.site)) == moves_from_.end()) return;  // nothing to fold
  size_t limit = size_ < kLookahead ? size_ : kLookahead;
  for (size_t i = 1; i < limit; ++i) {
    size_t slot = (head_ + i) & mask_;
    const Event& e = ring_[slot];
    if (folded_[slot] || e.thread != alloc.stream || e.site != alloc.site) continue;
    if (e.kind != Event::kMove || alloc.address != e.address) return;  // address mode: another block
    alloc.site = e.new_site;
    folded_[slot] = 1;
    forget_move(e);
    return;
  }
}

// With no move in the ring, fold_move would fold nothing into these allocations. An
// allocation looks `kLookahead` events ahead when it comes to the front, and a move
// decoded later could be within its reach: a run ends where its events' lookahead
// is not decoded yet (unless the stream has nothing more).
size_t LookaheadStream::plain_run(uint64_t until, bool at_until) const {
  if (moves_ || size_ == 0) return 0;
  size_t limit = exhausted_ ? size_ : size_ >= kLookahead ? size_ - (kLookahead - 1) : 0;
  limit = std::min(limit, capacity_ - head_);
  const Event* e = &ring_[head_];
  const uint8_t* folded = &folded_[head_];
  auto plain = [&](size_t i) {
    return !folded[i] && (e[i].kind == Event::kAlloc || (e[i].kind == Event::kFree && e[i].thread == e[i].stream));
  };
  size_t n = 0;
  if (until == std::numeric_limits<uint64_t>::max() && at_until) {  // no other stream waits
    while (n < limit && plain(n)) ++n;
    return n;
  }
  while (n < limit && plain(n) && (e[n].time < until || (e[n].time == until && at_until))) ++n;
  return n;
}

void LookaheadStream::skip_plain(size_t count) {
  head_ = (head_ + count) & mask_;
  size_ -= count;
  if (size_ < kLookahead || ahead_) fill();  // decoded ahead: take what came, give back slots
  while (size_ && folded_[head_]) {  // as pop() leaves it
    head_ = (head_ + 1) & mask_;
    --size_;
    if (size_ < kLookahead) fill();
  }
  if (moves_ && size_) fold_move();
}

DecodeAhead::~DecodeAhead() {
  try {
    stop();
  } catch (...) {  // the pass ended another way: its failure stands
  }
}

void DecodeAhead::start() { thread_ = std::thread([this] { run(); }); }

void DecodeAhead::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  work_.notify_all();
  decoded_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (failure_) {
    std::exception_ptr failure = failure_;
    failure_ = nullptr;
    std::rethrow_exception(failure);
  }
}

void DecodeAhead::wait_for(const LookaheadStream& stream) {
  std::unique_lock<std::mutex> lock(mutex_);
  waiting_.store(true);
  decoded_.wait(lock, [&] { return stream.decoded_more() || stop_.load(); });
  waiting_.store(false);
}

bool DecodeAhead::any_room() const {
  for (const LookaheadStream* s : streams_)
    if (s->room_to_decode()) return true;
  return false;
}

void DecodeAhead::run() {
  try {
    for (;;) {
      bool decoded = false;
      for (LookaheadStream* s : streams_) decoded |= s->decode_ahead();
      if (decoded) {
        if (waiting_.load()) {
          std::lock_guard<std::mutex> lock(mutex_);
          decoded_.notify_all();
        }
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      idle_.store(true);
      work_.wait(lock, [&] { return stop_.load() || any_room(); });
      idle_.store(false);
      if (stop_.load()) return;
    }
  } catch (...) {  // out of memory while decoding: the pass stops, and stop() throws it
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = std::current_exception();
    stop_.store(true);
    decoded_.notify_all();
  }
}

namespace {

// Streams worth a thread that decodes ahead: the largest few, each with enough events
// that handing batches over pays (the rings' memory stays bounded).
constexpr size_t kMaxAheadStreams = 4;
constexpr uint64_t kMinAheadBytes = uint64_t{1} << 20;

// HEAPTYPE_DECODE_AHEAD_BYTES: the least event bytes of a stream decoded ahead ("off":
// none). Tests set 0 to decode small profiles ahead too.
bool decode_ahead_threshold(uint64_t* bytes) {
  const char* text = std::getenv("HEAPTYPE_DECODE_AHEAD_BYTES");
  *bytes = kMinAheadBytes;
  if (!text || !*text) return std::thread::hardware_concurrency() >= 2;
  if (std::strcmp(text, "off") == 0) return false;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (*end == '\0') *bytes = value;
  return true;
}

std::vector<uint32_t> threads_to_decode_ahead(const format::ProfileFile& file) {
  uint64_t least = 0;
  if (!decode_ahead_threshold(&least)) return {};
  std::vector<std::pair<uint64_t, uint32_t>> sizes;
  for (const auto& entry : file.event_chunks()) {
    uint64_t bytes = 0;
    for (const format::ChunkRef& chunk : entry.second) bytes += chunk.size;
    if (bytes >= least) sizes.emplace_back(bytes, entry.first);
  }
  std::sort(sizes.begin(), sizes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<uint32_t> threads;
  for (size_t i = 0; i < sizes.size() && i < kMaxAheadStreams; ++i) threads.push_back(sizes[i].second);
  return threads;
}

}  // namespace

EventMerge::EventMerge(const format::ProfileFile& file, BlockLedger* ledger) : ledger_(ledger) {
  std::vector<uint32_t> ahead = threads_to_decode_ahead(file);
  if (!ahead.empty()) decode_ahead_.reset(new DecodeAhead());
  for (const auto& entry : file.event_chunks()) {
    bool decoded_ahead = std::find(ahead.begin(), ahead.end(), entry.first) != ahead.end();
    stream_of_thread_[entry.first] = streams_.size();
    threads_.push_back(entry.first);
    streams_.emplace_back(new LookaheadStream(file, entry.first, decoded_ahead ? decode_ahead_.get() : nullptr));
    if (decoded_ahead) decode_ahead_->add(streams_.back().get());
  }
  if (decode_ahead_) decode_ahead_->start();
  for (auto& stream : streams_) stream->start();
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
