#include "event_decoder.hpp"

#include <cstdio>
#include <cstring>
#include <limits>

namespace heaptype {
namespace format {
namespace {

const std::vector<ChunkRef> kNoChunks;

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

constexpr uint64_t kMaxIndex = std::numeric_limits<uint32_t>::max();
// No process can address a block this large (x86-64 and AArch64 user space is at
// most 2^48 bytes with 4-level tables): a larger size is damage, and refusing it
// keeps the analysis' byte sums far from overflowing.
constexpr uint64_t kMaxBlockSize = uint64_t{1} << 48;
// Distinct findings kept per thread; more are ignored (a program gets a few kinds wrong
// at a few places, not millions).
constexpr size_t kMaxFindings = 1u << 16;

}  // namespace

ThreadEvents::ThreadEvents(const ProfileFile& file, uint32_t thread)
    : file_(file), thread_(thread), addresses_(file.has_addresses()), distances_(file.version() >= 3) {
  auto it = file.event_chunks().find(thread);
  chunks_ = it == file.event_chunks().end() ? &kNoChunks : &it->second;
}

bool ThreadEvents::load_chunk() {
  while (pos_ == end_) {
    if (chunk_index_ == chunks_->size()) return false;
    const ChunkRef& chunk = (*chunks_)[chunk_index_++];
    if (!file_.read_payload(chunk, &buffer_)) return fail("read error at offset " + std::to_string(chunk.offset));
    bytes_done_ += chunk.size;
    pos_ = buffer_.data();
    end_ = pos_ + buffer_.size();
  }
  return true;
}

bool ThreadEvents::fail(const std::string& what) {
  if (error_.empty()) error_ = "thread " + std::to_string(thread_) + ": " + what;
  pos_ = end_ = nullptr;
  chunk_index_ = chunks_->size();
  return false;
}

bool ThreadEvents::read_slow(uint64_t* value, const char* record) {
  if (get_varint(&pos_, end_, value)) return true;
  return fail(std::string(record) + " record cut short");
}

bool ThreadEvents::read_address(uint64_t* address, const char* record) {
  *address = 0;
  if (!addresses_) return true;
  uint64_t v;
  if (!read(&v, record)) return false;
  *address = decode_address_delta(v, last_address_);
  return true;
}

size_t ThreadEvents::next_batch(Event* out, size_t count, uint8_t* own) {
  size_t n = 0;
  bool one_byte = distances_ && !addresses_;
  while (n < count) {
    if (one_byte) {
      size_t got = one_byte_records(out + n, count - n);
      if (own) std::memset(own + n, 1, got);
      n += got;
      if (n == count) break;
    }
    if (!next(out + n)) break;
    if (own) own[n] = out[n].kind == Event::kAlloc || (out[n].kind == Event::kFree && out[n].thread == thread_);
    ++n;
  }
  return n;
}

// Most records of a version-3 profile without addresses are one byte: an ALLOC or a
// FREE at a site near the newest, or FREE_LAST. They are decoded here with the
// stream's state in registers, as next() decodes them; at any other record (or an
// undefined site: next() says what is wrong) this stops and next() goes on.
size_t ThreadEvents::one_byte_records(Event* out, size_t count) {
  if (sites_.empty()) return 0;
  const uint8_t* p = pos_;
  const uint8_t* end = end_;
  const int64_t newest = static_cast<int64_t>(sites_.size() - 1);
  const uint8_t free_last = static_cast<uint8_t>(control_record_head(ControlOp::kFreeLast));
  uint32_t last_site = last_alloc_site_;
  bool open = last_alloc_open_, just_allocated = alloc_just_before_;
  size_t n = 0;
  for (; n < count && p < end; ++n, ++p) {
    uint8_t b = *p;
    if (b & 0x80) break;
    Event& e = out[n];
    if (b & 1) {  // ALLOC
      int64_t site = newest - unzigzag(b >> 1);
      if (site < 0 || site > newest) break;
      e = Event{Event::kAlloc, false, thread_, thread_, static_cast<uint32_t>(site), 0, time_, 0};
      last_site = static_cast<uint32_t>(site);
      open = just_allocated = true;
    } else if ((b & 3) == 0) {  // FREE of one of this thread's sites
      int64_t site = newest - unzigzag(b >> 2);
      if (site < 0 || site > newest) break;
      bool temporary = just_allocated && static_cast<uint32_t>(site) == last_site;
      e = Event{Event::kFree, temporary, thread_, thread_, static_cast<uint32_t>(site), 0, time_, 0};
      just_allocated = false;
    } else if (b == free_last && open) {
      e = Event{Event::kFree, just_allocated, thread_, thread_, last_site, 0, time_, 0};
      open = just_allocated = false;
    } else {
      break;
    }
  }
  pos_ = p;
  last_alloc_site_ = last_site;
  last_alloc_open_ = open;
  alloc_just_before_ = just_allocated;
  return n;
}

// heaptrack's rule within this thread's stream (see core/temporaries.hpp): the record
// before this free was an ALLOC at its site. Every free ends the allocation's chance.
// FREE_LAST alone is not enough: the runtime writes it for the thread's last allocated
// block even after other frees.
bool ThreadEvents::freed_right_after_allocation(uint32_t site) {
  bool temporary = alloc_just_before_ && site == last_alloc_site_;
  alloc_just_before_ = false;
  return temporary;
}

bool ThreadEvents::undefined_site(int64_t n, const char* record) {
  return fail(std::string(record) + " at undefined site " + std::to_string(n));
}

bool ThreadEvents::next(Event* out) {
  for (;;) {
    if (!chunk_ready()) return false;
    uint64_t v;
    if (!read(&v, "event")) return false;
    *out = Event{Event::kAlloc, false, thread_, thread_, 0, 0, time_, 0};
    if (v & 1) {  // ALLOC
      if (!site_of_record(v >> 1, "allocation", &out->site)) return false;
      if (!read_address(&out->address, "allocation")) return false;
      if (addresses_) last_address_ = out->address;
      last_alloc_site_ = out->site;
      last_alloc_open_ = true;
      alloc_just_before_ = true;
      return true;
    }
    if ((v & 3) == 0) {  // FREE of one of this thread's sites
      if (!site_of_record(v >> 2, "free", &out->site)) return false;
      out->kind = Event::kFree;
      out->temporary = freed_right_after_allocation(out->site);
      return read_address(&out->address, "free");
    }
    uint64_t operands[7];
    switch (static_cast<ControlOp>(v >> 2)) {
      case ControlOp::kFreeLast:
        if (!last_alloc_open_) return fail("free of the last allocation with no allocation open");
        last_alloc_open_ = false;
        out->kind = Event::kFree;
        out->site = last_alloc_site_;
        out->temporary = freed_right_after_allocation(out->site);
        out->address = addresses_ ? last_address_ : 0;
        return true;
      case ControlOp::kTime:
        if (!read(&operands[0], "time")) return false;
        if (operands[0] > std::numeric_limits<uint64_t>::max() - time_) return fail("time overflows");
        time_ += operands[0];
        continue;
      case ControlOp::kSite: {
        for (int i = 0; i < 5; ++i)
          if (!read(&operands[i], "site")) return false;
        if (distances_) {
          operands[2] = value_from(&deltas_.type, operands[2]);
          operands[3] = value_from(&deltas_.code, operands[3]);
          if (operands[4] >= nodes_.size()) return fail("site refers to a node before the first");
          operands[4] = nodes_.size() - 1 - operands[4];
        }
        if (operands[4] >= nodes_.size()) return fail("site refers to undefined node " + std::to_string(operands[4]));
        if (operands[0] > kMaxBlockSize) return fail("site of " + std::to_string(operands[0]) + " bytes, more than any process can address");
        if (sites_.size() >= kMaxIndex) return fail("too many sites");
        SiteDef def;
        def.site = {operands[0], operands[1], operands[2], operands[3], operands[4]};
        sites_.push_back(def);
        continue;
      }
      case ControlOp::kNode:
        for (int i = 0; i < 3; ++i)
          if (!read(&operands[i], "node")) return false;
        if (distances_) {
          if (operands[0] == 0 || operands[0] > nodes_.size()) return fail("node refers to a parent after it or before the root");
          operands[0] = nodes_.size() - operands[0];
          operands[1] = value_from(&deltas_.function, operands[1]);
          operands[2] = value_from(&deltas_.code, operands[2]);
        }
        if (operands[0] >= nodes_.size()) return fail("node refers to undefined parent " + std::to_string(operands[0]));
        if (nodes_.size() >= kMaxIndex) return fail("too many nodes");
        nodes_.push_back({operands[0], operands[1], operands[2]});
        continue;
      case ControlOp::kFreeRemote:
        for (int i = 0; i < 2; ++i)
          if (!read(&operands[i], "remote free")) return false;
        if (operands[0] == 0 || operands[0] > kMaxIndex || operands[1] >= kMaxIndex)
          return fail("remote free names thread " + std::to_string(operands[0]) + " site " +
                      std::to_string(operands[1]));
        out->kind = Event::kFree;
        out->thread = static_cast<uint32_t>(operands[0]);
        out->site = static_cast<uint32_t>(operands[1]);
        alloc_just_before_ = false;
        return read_address(&out->address, "remote free");
      case ControlOp::kDerivedSite: {
        for (int i = 0; i < 4; ++i)
          if (!read(&operands[i], "derived site")) return false;
        if (operands[0] == 0 || operands[0] > kMaxIndex || operands[1] >= kMaxIndex)
          return fail("derived site names thread " + std::to_string(operands[0]) + " site " +
                      std::to_string(operands[1]));
        if (sites_.size() >= kMaxIndex) return fail("too many sites");
        SiteDef def;
        def.site = {0, operands[3], operands[2], 0, 0};
        def.derived = true;
        def.base_thread = static_cast<uint32_t>(operands[0]);
        def.base_site = static_cast<uint32_t>(operands[1]);
        sites_.push_back(def);
        continue;
      }
      case ControlOp::kMove:
        for (int i = 0; i < 3; ++i)
          if (!read(&operands[i], "move")) return false;
        if (operands[0] == 0 || operands[0] > kMaxIndex || operands[1] >= kMaxIndex)
          return fail("move names thread " + std::to_string(operands[0]) + " site " + std::to_string(operands[1]));
        if (operands[2] >= sites_.size()) return fail("move to undefined site " + std::to_string(operands[2]));
        // The writer moves its last allocated block, if any block of that site (FREE_LAST).
        if (last_alloc_open_ && operands[0] == thread_ && operands[1] == last_alloc_site_)
          last_alloc_site_ = static_cast<uint32_t>(operands[2]);
        out->kind = Event::kMove;
        out->thread = static_cast<uint32_t>(operands[0]);
        out->site = static_cast<uint32_t>(operands[1]);
        out->new_site = static_cast<uint32_t>(operands[2]);
        return read_address(&out->address, "move");
      case ControlOp::kStack:
        if (!read(&operands[0], "stack depth")) return false;
        out->kind = Event::kStack;
        out->address = operands[0];
        return true;
      case ControlOp::kFinding: {
        for (int i = 0; i < 7; ++i)
          if (!read(&operands[i], "finding")) return false;
        if (operands[1] > kMaxIndex || operands[2] >= kMaxIndex)
          return fail("finding names thread " + std::to_string(operands[1]) + " site " + std::to_string(operands[2]));
        if (operands[6] >= nodes_.size()) return fail("finding refers to undefined node " + std::to_string(operands[6]));
        if (findings_.size() >= kMaxFindings) continue;  // damage: bounded memory, the events stand
        FindingDef f{operands[0], static_cast<uint32_t>(operands[1]), static_cast<uint32_t>(operands[2]),
                     operands[3], operands[4], operands[5], operands[6]};
        ++findings_[f];
        continue;
      }
      default:
        return fail("unknown record " + hex(v));
    }
  }
}

}  // namespace format
}  // namespace heaptype
