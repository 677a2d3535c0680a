#include "symbol_cache.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace heaptype {
namespace symbolize {

const char kDefaultCacheDir[] = "<default>";

namespace {

const char kMagic[8] = {'H', 'T', 'S', 'Y', 'M', 'C', '\r', '\n'};
constexpr uint32_t kFormatVersion = 1;  // bump when the meaning of entries changes
constexpr uint32_t kNoString = 0xFFFFFFFFu;
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 8;  // magic, version, reserved, payload size, checksum

enum EntryFlags : uint8_t { kFound = 1, kWithLines = 2, kHasStart = 4 };

uint64_t fnv1a(const char* data, size_t size, uint64_t hash = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < size; ++i) {
    hash ^= static_cast<unsigned char>(data[i]);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

bool caching_disabled(std::string value) {
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t begin = value.find_first_not_of(" \t"), end = value.find_last_not_of(" \t");
  value = begin == std::string::npos ? "" : value.substr(begin, end - begin + 1);
  return value.empty() || value == "off" || value == "0" || value == "none" || value == "no";
}

std::string home_directory() {
  if (const char* home = std::getenv("HOME")) return home;
  if (const passwd* entry = getpwuid(getuid())) return entry->pw_dir;
  return ".";
}

// --- encoding ---------------------------------------------------------------------

class Encoder {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void raw(const void* data, size_t size) { out_.append(static_cast<const char*>(data), size); }
  // Strings go to a table written ahead of everything else; this writes its index.
  void string(const std::string& s) {
    if (s.empty()) return u32(kNoString);
    auto found = index_.find(s);
    if (found == index_.end()) {
      found = index_.emplace(s, static_cast<uint32_t>(strings_.size())).first;
      strings_.push_back(&found->first);
    }
    u32(found->second);
  }
  std::string payload() const {
    Encoder table;
    table.u32(static_cast<uint32_t>(strings_.size()));
    for (const std::string* s : strings_) {
      table.u32(static_cast<uint32_t>(s->size()));
      table.raw(s->data(), s->size());
    }
    return table.out_ + out_;
  }

 private:
  std::string out_;
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<const std::string*> strings_;
};

class Decoder {
 public:
  Decoder(const char* data, size_t size) : data_(data), end_(data + size) {}
  bool ok() const { return ok_; }
  bool at_end() const { return data_ == end_; }
  uint8_t u8() { uint8_t v = 0; raw(&v, 1); return v; }
  uint32_t u32() { uint32_t v = 0; raw(&v, sizeof v); return v; }
  uint64_t u64() { uint64_t v = 0; raw(&v, sizeof v); return v; }
  void raw(void* out, size_t size) {
    if (!ok_ || static_cast<size_t>(end_ - data_) < size) {
      ok_ = false;
      return;
    }
    std::memcpy(out, data_, size);
    data_ += size;
  }
  bool read_strings() {
    uint32_t count = u32();
    if (!ok_ || count > static_cast<size_t>(end_ - data_) / 4) return ok_ = false;
    strings_.reserve(count);
    for (uint32_t i = 0; i < count && ok_; ++i) {
      uint32_t size = u32();
      if (!ok_ || size > static_cast<size_t>(end_ - data_)) return ok_ = false;
      strings_.emplace_back(data_, size);
      data_ += size;
    }
    return ok_;
  }
  std::string string() {
    uint32_t index = u32();
    if (index == kNoString) return "";
    if (index >= strings_.size()) ok_ = false;
    return ok_ ? strings_[index] : std::string();
  }
  // A count of items each at least `item_size` bytes: checked against what is left.
  uint32_t count(size_t item_size) {
    uint32_t n = u32();
    if (ok_ && n > static_cast<size_t>(end_ - data_) / item_size) ok_ = false;
    return ok_ ? n : 0;
  }

 private:
  const char* data_;
  const char* end_;
  bool ok_ = true;
  std::vector<std::string> strings_;
};

void encode_entry(Encoder& e, uint64_t pc, const CodeInfo& info) {
  e.u64(pc);
  e.u8(static_cast<uint8_t>((info.found ? kFound : 0) | (info.with_lines ? kWithLines : 0) |
                            (info.has_start ? kHasStart : 0)));
  e.string(info.function);
  e.u64(info.start);
  e.u32(static_cast<uint32_t>(info.frames.size()));
  for (const Frame& f : info.frames) {
    e.string(f.function);
    e.string(f.file);
    e.u32(f.line);
    e.u8(f.inlined ? 1 : 0);
    e.u64(f.type_argument_size);
  }
}

CodeInfo decode_entry(Decoder& d, uint64_t* pc) {
  CodeInfo info;
  *pc = d.u64();
  uint8_t flags = d.u8();
  info.found = flags & kFound;
  info.with_lines = flags & kWithLines;
  info.has_start = flags & kHasStart;
  info.function = d.string();
  info.start = d.u64();
  uint32_t frames = d.count(4 + 4 + 4 + 1 + 8);
  info.frames.resize(frames);
  for (Frame& f : info.frames) {
    f.function = d.string();
    f.file = d.string();
    f.line = d.u32();
    f.inlined = d.u8() != 0;
    f.type_argument_size = d.u64();
  }
  return info;
}

std::string encode_payload(const CacheContents& contents) {
  Encoder e;
  e.string(contents.binary);
  e.u8(contents.has_tags ? 1 : 0);
  e.u8(contents.tags.has_symtab ? 1 : 0);
  e.u32(static_cast<uint32_t>(contents.tags.tags.size()));
  for (const auto& tag : contents.tags.tags) {
    e.u64(tag.first);
    e.string(tag.second);
  }
  e.u32(static_cast<uint32_t>(contents.entries.size()));
  for (const auto& entry : contents.entries) encode_entry(e, entry.first, entry.second);
  return e.payload();
}

bool decode_payload(const char* data, size_t size, CacheContents* out) {
  Decoder d(data, size);
  if (!d.read_strings()) return false;
  out->binary = d.string();
  out->has_tags = d.u8() != 0;
  out->tags.has_symtab = d.u8() != 0;
  for (uint32_t n = d.count(8 + 4); n > 0 && d.ok(); --n) {
    uint64_t address = d.u64();
    out->tags.tags[address] = d.string();
  }
  for (uint32_t n = d.count(8 + 1 + 4 + 8 + 4); n > 0 && d.ok(); --n) {
    uint64_t pc = 0;
    CodeInfo info = decode_entry(d, &pc);
    out->entries[pc] = std::move(info);
  }
  return d.ok() && d.at_end();
}

bool make_directories(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    std::string prefix = path.substr(0, at);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

}  // namespace

std::string default_cache_dir() {
  if (const char* configured = std::getenv("HEAPTYPE_CACHE_DIR"))
    return caching_disabled(configured) ? "" : configured;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  std::string base = xdg != nullptr && *xdg ? xdg : home_directory() + "/.cache";
  return base + "/heaptype";
}

std::string resolve_cache_dir(const std::string& option) {
  return option == kDefaultCacheDir ? default_cache_dir() : option;
}

std::string cache_key(const std::string& build_id, const std::string& path) {
  if (!build_id.empty()) return build_id;
  struct stat st {};
  stat(path.c_str(), &st);
  char* real = realpath(path.c_str(), nullptr);
  std::ostringstream stamp;
  stamp << (real ? real : path.c_str()) << '\0' << st.st_size << '\0'
        << static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  std::free(real);
  std::string text = stamp.str();
  char key[32];
  std::snprintf(key, sizeof key, "path-%016llx", static_cast<unsigned long long>(fnv1a(text.data(), text.size())));
  return key;
}

std::string cache_file_path(const std::string& cache_dir, const std::string& key) {
  return cache_dir + "/symbols/" + key + ".htsym";
}

bool read_cache_file(const std::string& file, CacheContents* out) {
  *out = CacheContents();
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < kHeaderSize || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) return false;
  uint32_t version = 0;
  uint64_t payload_size = 0, checksum = 0;
  std::memcpy(&version, data.data() + 8, 4);
  std::memcpy(&payload_size, data.data() + 16, 8);
  std::memcpy(&checksum, data.data() + 24, 8);
  const char* payload = data.data() + kHeaderSize;
  if (version != kFormatVersion || payload_size != data.size() - kHeaderSize ||
      checksum != fnv1a(payload, payload_size) || !decode_payload(payload, payload_size, out)) {
    *out = CacheContents();
    return false;
  }
  return true;
}

bool write_cache_file(const std::string& file, const CacheContents& contents) {
  std::string directory = file.substr(0, file.rfind('/'));
  if (!make_directories(directory)) return false;
  std::string payload = encode_payload(contents);
  uint32_t version = kFormatVersion, reserved = 0;
  uint64_t size = payload.size(), checksum = fnv1a(payload.data(), payload.size());
  std::string temporary = file + ".XXXXXX";
  int fd = mkstemp(&temporary[0]);
  if (fd < 0) return false;
  std::string header(kMagic, sizeof kMagic);
  header.append(reinterpret_cast<const char*>(&version), 4);
  header.append(reinterpret_cast<const char*>(&reserved), 4);
  header.append(reinterpret_cast<const char*>(&size), 8);
  header.append(reinterpret_cast<const char*>(&checksum), 8);
  bool ok = true;
  for (const std::string* part : {&header, &payload}) {
    size_t done = 0;
    while (ok && done < part->size()) {
      ssize_t n = write(fd, part->data() + done, part->size() - done);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      done += ok ? static_cast<size_t>(n) : 0;
    }
  }
  fchmod(fd, 0644);
  ok = close(fd) == 0 && ok;
  if (ok && std::rename(temporary.c_str(), file.c_str()) == 0) return true;
  unlink(temporary.c_str());
  return false;
}

void merge_cache_contents(CacheContents& ours, CacheContents&& theirs) {
  if (!ours.has_tags && theirs.has_tags) {
    ours.has_tags = true;
    ours.tags = std::move(theirs.tags);
  }
  for (auto& entry : theirs.entries) {
    auto found = ours.entries.find(entry.first);
    if (found == ours.entries.end())
      ours.entries.emplace(entry.first, std::move(entry.second));
    else if (!found->second.with_lines && entry.second.with_lines)
      found->second = std::move(entry.second);
  }
}

}  // namespace symbolize
}  // namespace heaptype
