#include "profile_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "compressed_stream.hpp"

namespace heaptype {
namespace format {
namespace {

// Chunks whose payload is read whole while indexing (program, modules, threads,
// end) are small; a larger one is damage, not a reason to allocate.
constexpr uint32_t kMaxProcessChunk = 1u << 22;

bool read_exact(int fd, uint64_t offset, void* out, size_t size) {
  auto* p = static_cast<uint8_t*>(out);
  while (size) {
    ssize_t n = pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::vector<std::string> split_at_nul(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\0') {
      if (i > start || parts.empty()) parts.emplace_back(text, start, i - start);
      start = i + 1;
    }
  }
  return parts;
}

bool known_kind(uint8_t kind) {
  switch (static_cast<ChunkKind>(kind)) {
    case ChunkKind::kProgram:
    case ChunkKind::kModules:
    case ChunkKind::kThread:
    case ChunkKind::kEvents:
    case ChunkKind::kEnd:
    case ChunkKind::kSnapshot:
    case ChunkKind::kTallies:
    case ChunkKind::kAggregate:
    case ChunkKind::kRetired:
    case ChunkKind::kSurvivors:
    case ChunkKind::kZstdFollows:
      return true;
  }
  return false;
}

// A chunk header that can be one: its magic, a kind this reader knows, a payload
// within the limit (not whether the payload is in the file).
bool plausible(const ChunkHeader& h) {
  return h.magic == kChunkMagic && known_kind(h.kind) && h.payload_size <= kMaxChunkPayload;
}

}  // namespace

ProfileFile::ProfileFile(const std::string& path) : path_(path) {
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw ProfileError(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    int error = errno;
    close(fd_);
    throw ProfileError(path + (S_ISDIR(st.st_mode) ? ": is a directory" : ": cannot stat: " +
                                                                             std::string(std::strerror(error))));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  try {
    read_header();
    if (damage_.empty() && (header_.flags & kFlagZstd)) inflate(header_.header_size);
    else if (damage_.empty()) inflate_after_plain_chunks();
  } catch (...) {
    close(fd_);
    fd_ = -1;
    throw;
  }
  index_chunks();
}

ProfileFile::~ProfileFile() {
  if (fd_ >= 0) close(fd_);
}

void ProfileFile::read_header() {
  char magic[sizeof kFileMagic] = {};
  size_t magic_bytes = size_ < sizeof magic ? static_cast<size_t>(size_) : sizeof magic;
  if (size_ == 0) throw ProfileError(path_ + ": empty file, not a HeapType profile");
  if (!read_exact(fd_, 0, magic, magic_bytes) || std::memcmp(magic, kFileMagic, magic_bytes) != 0)
    throw ProfileError(path_ + ": not a HeapType profile (no HEAPTYPE magic at the start)");
  if (size_ < sizeof(FileHeader)) {
    dropped_bytes_ = size_;
    damage_ = "the file ends inside its 64-byte header";
    return;
  }
  if (!read_exact(fd_, 0, &header_, sizeof header_)) throw ProfileError(path_ + ": cannot read its header");
  if (header_.version < kOldestVersion || header_.version > kVersion)
    throw ProfileError(path_ + ": profile format version " + std::to_string(header_.version) +
                       ", this HeapType reads versions " + std::to_string(kOldestVersion) + " to " +
                       std::to_string(kVersion));
  if (header_.header_size < sizeof(FileHeader))
    throw ProfileError(path_ + ": damaged header (header size " + std::to_string(header_.header_size) +
                       ", at least 64)");
  if (header_.header_size > size_)
    throw ProfileError(path_ + ": damaged header (header size " + std::to_string(header_.header_size) +
                       " is past the end of the " + std::to_string(size_) + "-byte file)");
}

// A compressed profile: its chunks, decompressed into a temporary file, stand for it
// from here on (a copy of what is plain before `from` first, so that offsets stay the
// file's own).
void ProfileFile::inflate(uint64_t from) {
  std::vector<uint8_t> prefix(from);
  if (!read_exact(fd_, 0, prefix.data(), prefix.size()))
    throw ProfileError(path_ + ": cannot read its first " + std::to_string(from) + " bytes");
  Inflated inflated;
  try {
    inflated = inflate_to_temporary(fd_, from, size_, prefix.data(), prefix.size());
  } catch (const std::runtime_error& e) {
    throw ProfileError(path_ + ": " + e.what());
  }
  close(fd_);
  fd_ = inflated.fd;
  compressed_size_ = size_;
  size_ = inflated.size;
  stream_damage_ = inflated.damage;
  if (!inflated.finished && stream_damage_.empty())
    warnings_.push_back("the compressed stream does not end where a frame ends (the program was still "
                        "running, or stopped without finishing): read up to its last whole block");
}

// A plain file whose chunks go on as a zstd stream after a ZSTD_FOLLOWS chunk (an
// aggregated profile that grew large): the chunk headers up to it are read (the rest of
// the plain part's damage is index_chunks()'s to find and name).
void ProfileFile::inflate_after_plain_chunks() {
  ChunkHeader h;
  for (uint64_t offset = header_.header_size; size_ - offset >= sizeof h;) {
    if (!read_exact(fd_, offset, &h, sizeof h) || !plausible(h) || size_ - offset - sizeof h < h.payload_size)
      return;
    offset += sizeof h + h.payload_size;
    if (static_cast<ChunkKind>(h.kind) == ChunkKind::kZstdFollows) return inflate(offset);
  }
}

void ProfileFile::index_chunks() {
  if (!damage_.empty()) return;
  uint64_t offset = header_.header_size;
  while (offset < size_) {
    ChunkHeader h;
    if (size_ - offset < sizeof h) {
      damage_ = "the file ends inside a chunk header at offset " + std::to_string(offset);
      break;
    }
    if (!read_exact(fd_, offset, &h, sizeof h)) {
      damage_ = "read error at offset " + std::to_string(offset);
      break;
    }
    if (!plausible(h)) {
      damage_ = "damaged chunk header at offset " + std::to_string(offset);
      break;
    }
    uint64_t payload = offset + sizeof h;
    if (size_ - payload < h.payload_size) {
      damage_ = "the file ends inside a chunk at offset " + std::to_string(offset) + " (" +
                std::to_string(h.payload_size) + "-byte payload, " + std::to_string(size_ - payload) +
                " bytes present)";
      break;
    }
    if (static_cast<ChunkKind>(h.kind) == ChunkKind::kEvents) {
      if (h.thread == 0) {
        damage_ = "events chunk of thread 0 at offset " + std::to_string(offset);
        break;
      }
      events_[h.thread].push_back({payload, h.payload_size});
      event_bytes_ += h.payload_size;
    } else {
      read_process_chunk(h, payload);
      if (!damage_.empty()) break;
    }
    offset = payload + h.payload_size;
  }
  dropped_bytes_ = size_ - offset;
  if (damage_.empty() && !stream_damage_.empty()) damage_ = stream_damage_;
  aggregate_.finish();
}

void ProfileFile::add_warning(const std::string& problem) {
  if (!problem.empty()) warnings_.push_back(problem);
}

void ProfileFile::read_process_chunk(const ChunkHeader& h, uint64_t offset) {
  if (h.payload_size > kMaxProcessChunk) {
    damage_ = "oversized chunk at offset " + std::to_string(offset - sizeof h);
    return;
  }
  std::string text(h.payload_size, '\0');
  if (h.payload_size && !read_exact(fd_, offset, &text[0], h.payload_size)) {
    damage_ = "read error at offset " + std::to_string(offset);
    return;
  }
  const uint8_t* begin = reinterpret_cast<const uint8_t*>(text.data());
  const uint8_t* end = begin + text.size();
  switch (static_cast<ChunkKind>(h.kind)) {
    case ChunkKind::kProgram: {
      std::vector<std::string> parts = split_at_nul(text);
      executable_ = parts[0];
      argv_.assign(parts.begin() + 1, parts.end());
      break;
    }
    case ChunkKind::kModules:
      modules_ = text;
      break;
    case ChunkKind::kThread: {
      if (h.thread == 0) {
        warnings_.push_back("a thread record names thread 0; ignored");
        break;
      }
      ThreadInfo info;
      info.number = h.thread;
      const uint8_t* p = begin;
      if (!get_varint(&p, end, &info.os_tid)) {
        warnings_.push_back("the record of thread " + std::to_string(h.thread) + " is damaged");
        break;
      }
      info.name.assign(reinterpret_cast<const char*>(p), static_cast<size_t>(end - p));
      threads_[h.thread] = info;
      break;
    }
    case ChunkKind::kEnd: {
      uint64_t v[kEndFieldsWithCause] = {};
      const uint8_t* p = begin;
      size_t fields = 0;
      while (fields < kEndFieldsWithCause && get_varint(&p, end, &v[fields])) ++fields;
      end_ = {true, v[0], v[1], v[2], v[3], v[4], {}};
      if (fields >= kEndFields) end_.buffer_uses.assign(v + 5, v + kEndFields);
      uint64_t cause = fields == kEndFieldsWithCause ? v[kEndFields] : 0;
      if (cause == static_cast<uint64_t>(EndCause::kExec) || cause == static_cast<uint64_t>(EndCause::kDump))
        end_.cause = static_cast<EndCause>(cause);
      break;
    }
    case ChunkKind::kSnapshot: {
      uint64_t time = 0;
      const uint8_t* p = begin;
      if (get_varint(&p, end, &time)) snapshots_.push_back(time);
      break;
    }
    case ChunkKind::kTallies:
      add_warning(aggregate_.add_tallies(h.thread, begin, end));
      break;
    case ChunkKind::kSurvivors:
      add_warning(aggregate_.add_survivors(begin, end));
      break;
    case ChunkKind::kRetired:
      add_warning(aggregate_.add_retired(begin, end));
      break;
    case ChunkKind::kAggregate:
      add_warning(aggregate_.close_set(begin, end));
      break;
    case ChunkKind::kEvents:
    case ChunkKind::kZstdFollows:  // the stream after it is read as the file (inflate)
      break;
  }
}

bool ProfileFile::read_payload(const ChunkRef& chunk, std::vector<uint8_t>* out) const {
  out->resize(chunk.size);
  return chunk.size == 0 || read_exact(fd_, chunk.offset, out->data(), chunk.size);
}

}  // namespace format
}  // namespace heaptype
