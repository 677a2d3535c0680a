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
// from the start: the move is folded into the allocation.
#ifndef HEAPTYPE_CORE_EVENT_MERGE_HPP
#define HEAPTYPE_CORE_EVENT_MERGE_HPP

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../format/event_decoder.hpp"

namespace heaptype {
namespace core {

class DecodeAhead;

// One thread's events with a short lookahead, for folding moves. Events are
// decoded in batches into a ring: here, or by another thread (DecodeAhead) into a
// larger ring that this one takes events from as they come.
class LookaheadStream {
 public:
  static constexpr size_t kLookahead = 256;
  static constexpr size_t kCapacity = 4 * kLookahead;  // decoded here
  static constexpr size_t kAheadCapacity = 1u << 14;   // decoded by another thread (640 KiB)
  static constexpr size_t kAheadBatch = 2048;          // the other thread's batch

  // With `ahead`, that thread decodes this stream's events. Nothing is read before start().
  LookaheadStream(const format::ProfileFile& file, uint32_t thread, DecodeAhead* ahead = nullptr);
  void start();
  bool empty() const { return size_ == 0; }
  const format::Event& front() const { return ring_[head_]; }
  void pop() {
    do {
      if (ring_[head_].kind == format::Event::kMove && !folded_[head_]) forget_move(ring_[head_]);
      head_ = (head_ + 1) & mask_;
      --size_;
      // Decoded ahead: slots go back to the other thread now and then, not one by one.
      if (size_ < kLookahead || (ahead_ && (head_ & (kAheadBatch - 1)) == 0)) fill();
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

  // For DecodeAhead, on its thread: decodes a batch into free slots (false: no room,
  // or nothing more to decode).
  bool decode_ahead();
  bool room_to_decode() const;
  // For DecodeAhead, on the pass's thread: events decoded and not taken yet, or the end.
  bool decoded_more() const;

 private:
  format::Event& at(size_t i) { return ring_[(head_ + i) & mask_]; }
  void fill();
  void take_decoded();
  void note_decoded(size_t slot);
  void fold_move();
  static uint64_t site_key(uint32_t thread, uint32_t site) { return static_cast<uint64_t>(thread) << 32 | site; }
  void forget_move(const format::Event& move);

  format::ThreadEvents events_;
  DecodeAhead* ahead_;
  size_t capacity_;
  size_t mask_;
  std::vector<format::Event> ring_;
  std::vector<uint8_t> folded_;  // [slot]: a MOVE folded into its allocation: skipped
  size_t head_ = 0;
  size_t size_ = 0;
  size_t moves_ = 0;  // MOVE events in the ring
  // How many of them leave each (thread, site): an allocation at a site no move
  // leaves cannot fold one, without a look ahead (a thousand typed-late blocks
  // in a GoogleTest profile would otherwise make each allocation scan the window).
  std::unordered_map<uint64_t, uint32_t> moves_from_;
  bool exhausted_ = false;
  // Decoded ahead: the other thread has put `produced_` events in all into the ring
  // (`decoded_all_`: and there are no more); this one has taken `taken_` of them, the
  // last `size_` of which it still holds, and has given back the slots of `released_`.
  std::atomic<uint64_t> produced_{0};
  std::atomic<bool> decoded_all_{false};
  std::atomic<uint64_t> released_{0};
  uint64_t taken_ = 0;
};

// One thread that decodes the largest streams ahead of the pass (the machine's second
// core), each into its ring. The pass waits only when a ring runs short.
class DecodeAhead {
 public:
  DecodeAhead() = default;
  ~DecodeAhead();
  DecodeAhead(const DecodeAhead&) = delete;
  DecodeAhead& operator=(const DecodeAhead&) = delete;
  // The streams it decodes, then the thread.
  void add(LookaheadStream* stream) { streams_.push_back(stream); }
  void start();
  // Ends the thread; streams left half-read end where they are.
  void stop();
  bool stopped() const { return stop_.load(); }
  // The pass gave slots back: a thread with nothing to do looks again.
  void room_made() {
    if (idle_.load()) {
      std::lock_guard<std::mutex> lock(mutex_);
      work_.notify_one();
    }
  }
  // Blocks the pass until `stream` has decoded events it has not taken (or ended).
  void wait_for(const LookaheadStream& stream);

 private:
  void run();
  bool any_room() const;
  void end_all();

  std::vector<LookaheadStream*> streams_;
  std::mutex mutex_;
  std::condition_variable work_;     // the thread waits for room
  std::condition_variable decoded_;  // the pass waits for events
  // Both sides check these with the other side's counters (sequentially consistent),
  // so that neither sleeps through the other's notice.
  std::atomic<bool> idle_{false};
  std::atomic<bool> waiting_{false};
  std::atomic<bool> stop_{false};
  std::exception_ptr failure_;  // thrown on its thread: thrown again in the pass
  std::thread thread_;
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
  // Stops decoding ahead: the pass is over (no next() after this).
  void finish() { if (decode_ahead_) decode_ahead_->stop(); }
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
  std::unique_ptr<DecodeAhead> decode_ahead_;  // stopped before the streams go
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
