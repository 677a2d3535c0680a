// event_merge.hpp: the threads' event streams merged into one, in time order.
//
// Streams are merged by their clock ticks, ties to the lower thread number. A free
// or move of another thread's block cannot come before that block's allocation:
// when the merge meets one whose site has no live block yet (both happened within
// one clock tick), it parks that stream until the other thread allocates at the
// site. Within a thread, order is exact. Counts are exact whatever the order; the
// interleaving of threads within one tick is what a peak may miss, by at most the
// bytes allocated in that tick. A block allocated untyped and moved to its typed site a few
// events later (its constructor allocated first) is counted at the typed site
// from the start: the move is folded into the allocation, and so is a second move
// that follows the first at its site (a block typed by its first member's report,
// then back by its new-expression's).
#ifndef HEAPTYPE_CORE_EVENT_MERGE_HPP
#define HEAPTYPE_CORE_EVENT_MERGE_HPP

#include <cstdint>
#include <deque>
#include <memory>
#include <queue>
#include <unordered_map>
#include <vector>

#include "../format/event_decoder.hpp"

namespace heaptype {
namespace core {

// One thread's events with a short lookahead, for folding moves. Events are
// decoded in batches into a ring.
class LookaheadStream {
 public:
  static constexpr size_t kLookahead = 256;

  LookaheadStream(const format::ProfileFile& file, uint32_t thread);
  bool empty() const { return size_ == 0; }
  const format::Event& front() const { return ring_[head_]; }
  void pop() {
    do {
      if (ring_[head_].kind == format::Event::kMove && !folded_[head_]) forget_move(ring_[head_]);
      folded_[head_] = 0;  // a free slot is never folded
      head_ = (head_ + 1) & kMask;
      --size_;
      if (size_ < kLookahead) fill();
    } while (size_ && folded_[head_]);
    if (moves_ && size_) fold_move();
  }
  // How many events from the front, contiguous in the ring, are plain: allocations
  // and frees of this thread's own sites, none after `until` (nor at it unless
  // `at_until`), where no move waits in the lookahead that one of them could fold.
  // They can be applied one after the other without a look at each (skip_plain).
  size_t plain_run(uint64_t until, bool at_until) const;
  // Drops `count` events of a plain run from the front (no move or folded event among them).
  void skip_plain(size_t count);
  const format::ThreadEvents& events() const { return events_; }

 private:
  static constexpr size_t kCapacity = 4 * kLookahead;
  static constexpr size_t kMask = kCapacity - 1;
  format::Event& at(size_t i) { return ring_[(head_ + i) & kMask]; }
  void fill();
  void fold_move();
  static uint64_t site_key(uint32_t thread, uint32_t site) { return static_cast<uint64_t>(thread) << 32 | site; }
  void forget_move(const format::Event& move);

  format::ThreadEvents events_;
  std::vector<format::Event> ring_;
  std::vector<uint8_t> folded_;  // [slot]: a MOVE folded into its allocation: skipped
  std::vector<uint8_t> plain_;   // [slot]: an allocation or a free of this thread's own site
  size_t head_ = 0;
  size_t size_ = 0;
  size_t moves_ = 0;  // MOVE events in the ring
  // How many of them leave each (thread, site): an allocation at a site no move
  // leaves cannot fold one, without a look ahead (a thousand typed-late blocks
  // in a GoogleTest profile would otherwise make each allocation scan the window).
  std::unordered_map<uint64_t, uint32_t> moves_from_;
  bool exhausted_ = false;
};

// Decides, for the merge, whether an event can be applied now.
class BlockLedger {
 public:
  virtual ~BlockLedger() = default;
  // Live blocks the analysis counts at (thread, site) now (negative: frees counted
  // ahead of their allocations).
  virtual int64_t live_blocks_at(uint32_t thread, uint32_t site) = 0;
};

class EventMerge {
 public:
  EventMerge(const format::ProfileFile& file, BlockLedger* ledger);

  // The next event in merged order; false at the end.
  bool next(format::Event* out);
  // Plain events (LookaheadStream::plain_run) that come next in merged order, in
  // order, when no stream waits: `*run` points at them; how many (0: use next()).
  // They stay valid until skip_run(count), which must come before the next call.
  size_t next_run(const format::Event** run);
  void skip_run(size_t count) { streams_[current_]->skip_plain(count); }
  // Tell the merge that (thread, site) just gained a live block.
  void on_live_block(uint32_t thread, uint32_t site) {
    if (parked_count_) wake_parked(thread, site);
  }

  const format::ThreadEvents* stream_of(uint32_t thread) const;
  std::vector<const format::ThreadEvents*> streams() const;
  uint64_t bytes_done() const;

 private:
  struct Head {
    uint64_t time;
    uint32_t thread;
    size_t stream;
    bool operator<(const Head& other) const {  // std::priority_queue is a max-heap
      if (time != other.time) return time > other.time;
      return thread > other.thread;
    }
  };
  static uint64_t key(uint32_t thread, uint32_t site) { return (static_cast<uint64_t>(thread) << 32) | site; }

  void push(size_t stream);
  void wake_parked(uint32_t thread, uint32_t site);
  void settle_current();
  bool must_wait(const format::Event& e, size_t stream);
  void release_waiters_of(uint32_t thread);
  bool force_one_parked();

  BlockLedger* ledger_;
  std::vector<std::unique_ptr<LookaheadStream>> streams_;
  std::vector<uint32_t> threads_;                          // [stream] -> thread number
  std::unordered_map<uint32_t, size_t> stream_of_thread_;
  std::priority_queue<Head> heap_;
  // The stream events come from while it stays first: no heap operation per event.
  size_t current_ = kNoStream;
  static constexpr size_t kNoStream = ~size_t{0};
  std::unordered_map<uint64_t, std::vector<size_t>> parked_;  // (thread, site) -> streams
  size_t parked_count_ = 0;
  std::vector<bool> force_next_;  // [stream]: its front waited long enough: apply it
  std::vector<uint32_t> just_finished_;  // threads whose streams ended with the last event
};

}  // namespace core
}  // namespace heaptype

#endif
