#include "profile_reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace heaptype {
namespace format {
namespace {

std::string hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::vector<uint64_t> varints(const ChunkRef& chunk, size_t max_count) {
  std::vector<uint64_t> out;
  const uint8_t* p = chunk.data;
  const uint8_t* end = chunk.data + chunk.size;
  uint64_t v;
  while (out.size() < max_count && get_varint(&p, end, &v)) out.push_back(v);
  return out;
}

}  // namespace

ProfileFile::ProfileFile(const std::string& path) : path_(path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ProfileError(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    throw ProfileError(path + ": cannot stat: " + std::strerror(errno));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_) {
    void* m = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      close(fd);
      throw ProfileError(path + ": cannot map: " + std::strerror(errno));
    }
    data_ = static_cast<const uint8_t*>(m);
  }
  close(fd);
  size_t magic_bytes = size_ < sizeof kFileMagic ? size_ : sizeof kFileMagic;
  if (size_ == 0 || std::memcmp(data_, kFileMagic, magic_bytes) != 0) {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
    throw ProfileError(path + ": not a HeapType profile (no HEAPTYPE magic at the start)");
  }
  if (size_ < sizeof(FileHeader)) {
    dropped_bytes_ = size_;
    damage_ = "the file ends inside its 64-byte header";
    return;
  }
  std::memcpy(&header_, data_, sizeof header_);
  if (header_.version != kVersion)
    throw ProfileError(path + ": profile format version " + std::to_string(header_.version) +
                       ", this HeapType reads version " + std::to_string(kVersion));
  index_chunks();
}

ProfileFile::~ProfileFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

void ProfileFile::index_chunks() {
  size_t offset = header_.header_size >= sizeof(FileHeader) ? header_.header_size : sizeof(FileHeader);
  while (offset < size_) {
    if (size_ - offset < sizeof(ChunkHeader)) {
      damage_ = "the file ends inside a chunk header at offset " + std::to_string(offset);
      break;
    }
    ChunkHeader h;
    std::memcpy(&h, data_ + offset, sizeof h);
    if (h.magic != kChunkMagic || h.kind < 1 || h.kind > 6 || h.payload_size > kMaxChunkPayload) {
      damage_ = "damaged chunk header at offset " + std::to_string(offset);
      break;
    }
    if (size_ - offset - sizeof h < h.payload_size) {
      damage_ = "the file ends inside a chunk at offset " + std::to_string(offset) + " (" +
                std::to_string(h.payload_size) + "-byte payload, " +
                std::to_string(size_ - offset - sizeof h) + " bytes present)";
      break;
    }
    ChunkRef chunk = {static_cast<ChunkKind>(h.kind), h.thread, data_ + offset + sizeof h, h.payload_size};
    read_chunk(chunk);
    offset += sizeof h + h.payload_size;
  }
  dropped_bytes_ = size_ - offset;
}

void ProfileFile::read_chunk(const ChunkRef& chunk) {
  const char* text = reinterpret_cast<const char*>(chunk.data);
  switch (chunk.kind) {
    case ChunkKind::kProgram: {
      std::vector<std::string> parts;
      size_t start = 0;
      for (size_t i = 0; i <= chunk.size; ++i) {
        if (i == chunk.size || text[i] == '\0') {
          if (i > start || parts.empty()) parts.emplace_back(text + start, i - start);
          start = i + 1;
        }
      }
      executable_ = parts.empty() ? "" : parts[0];
      argv_.assign(parts.begin() + (parts.empty() ? 0 : 1), parts.end());
      break;
    }
    case ChunkKind::kModules:
      modules_.assign(text, chunk.size);
      break;
    case ChunkKind::kThread: {
      const uint8_t* p = chunk.data;
      ThreadInfo info;
      info.number = chunk.thread;
      get_varint(&p, chunk.data + chunk.size, &info.os_tid);
      info.name.assign(reinterpret_cast<const char*>(p), static_cast<size_t>(chunk.data + chunk.size - p));
      threads_[chunk.thread] = info;
      break;
    }
    case ChunkKind::kEvents:
      events_[chunk.thread].push_back(chunk);
      break;
    case ChunkKind::kLive: {
      live_.clear();
      const uint8_t* p = chunk.data;
      const uint8_t* end = chunk.data + chunk.size;
      uint64_t v[2];
      while (p < end) {
        int n = 0;
        while (n < 2 && get_varint(&p, end, &v[n])) ++n;
        if (n < 2) {
          warnings_.push_back("the list of blocks live at exit is damaged");
          break;
        }
        live_.push_back({static_cast<uint32_t>(v[0]), v[1]});
      }
      break;
    }
    case ChunkKind::kEnd: {
      std::vector<uint64_t> v = varints(chunk, 5);
      v.resize(5, 0);
      end_ = {true, v[0], v[1], v[2], v[3], v[4]};
      break;
    }
  }
}

ThreadEvents::ThreadEvents(uint32_t thread, const std::vector<ChunkRef>& chunks)
    : thread_(thread), chunks_(chunks) {}

bool ThreadEvents::load_chunk() {
  while (pos_ == end_) {
    if (chunk_index_ == chunks_.size()) return false;
    const ChunkRef& chunk = chunks_[chunk_index_++];
    pos_ = chunk.data;
    end_ = chunk.data + chunk.size;
  }
  return true;
}

bool ThreadEvents::fail(const char* what) {
  error_ = "thread " + std::to_string(thread_) + ": " + what;
  pos_ = end_;
  chunk_index_ = chunks_.size();
  return false;
}

bool ThreadEvents::next(Event* out) {
  for (;;) {
    if (!load_chunk()) return false;
    uint64_t v;
    if (!get_varint(&pos_, end_, &v)) return fail("record cut short");
    if ((v & 1) == 0) {  // FREE of one of this thread's blocks
      uint64_t distance = v >> 1;
      if (distance == 0 || distance > next_number_) return fail("free of an allocation never made");
      *out = {Event::kFree, thread_, next_number_ - distance, time_us_, nullptr, 0, 0, 0, 0, 0, 0};
      return true;
    }
    if ((v & 3) == 1) {  // ALLOC
      uint64_t site = v >> 3;
      uint64_t delta;
      if (!get_varint(&pos_, end_, &delta)) return fail("allocation record cut short");
      if (site >= sites_.size()) return fail("allocation refers to an undefined site");
      int64_t step = unzigzag(delta);
      if (!(v & 4)) step = static_cast<int64_t>(static_cast<uint64_t>(step) << kAllocUnitShift);
      last_address_ += static_cast<uint64_t>(step);
      const Site& s = sites_[site];
      *out = {Event::kAlloc, thread_,      next_number_++, time_us_, &s, static_cast<uint32_t>(site),
              last_address_, s.type_tag, s.count, 0,           0};
      return true;
    }
    uint64_t operands[6];
    switch (static_cast<ControlOp>(v >> 2)) {
      case ControlOp::kTime:
        if (!get_varint(&pos_, end_, &operands[0])) return fail("time record cut short");
        time_us_ += operands[0];
        continue;
      case ControlOp::kSite:
        for (int i = 0; i < 5; ++i)
          if (!get_varint(&pos_, end_, &operands[i])) return fail("site record cut short");
        if (operands[4] >= nodes_.size()) return fail("site refers to an undefined calling-context node");
        sites_.push_back({operands[0], operands[1], operands[2], operands[3], operands[4]});
        continue;
      case ControlOp::kNode:
        for (int i = 0; i < 3; ++i)
          if (!get_varint(&pos_, end_, &operands[i])) return fail("node record cut short");
        if (operands[0] >= nodes_.size()) return fail("node refers to an undefined parent");
        nodes_.push_back({operands[0], operands[1], operands[2]});
        continue;
      case ControlOp::kFreeRemote:
        for (int i = 0; i < 2; ++i)
          if (!get_varint(&pos_, end_, &operands[i])) return fail("free record cut short");
        *out = {Event::kFree, static_cast<uint32_t>(operands[0]), operands[1], time_us_, nullptr, 0, 0, 0, 0, 0, 0};
        return true;
      case ControlOp::kRetype:
        for (uint64_t& operand : operands)
          if (!get_varint(&pos_, end_, &operand)) return fail("retype record cut short");
        *out = {Event::kRetype, static_cast<uint32_t>(operands[0]), operands[1], time_us_, nullptr, 0, 0,
                operands[2], operands[5], operands[3], operands[4]};
        return true;
      case ControlOp::kName:
        for (int i = 0; i < 4; ++i)
          if (!get_varint(&pos_, end_, &operands[i])) return fail("name record cut short");
        *out = {Event::kName, static_cast<uint32_t>(operands[0]), operands[1], time_us_, nullptr, 0, 0,
                operands[2], operands[3], 0, 0};
        return true;
      default:
        return fail(("unknown record " + hex(v)).c_str());
    }
  }
}

}  // namespace format
}  // namespace heaptype
