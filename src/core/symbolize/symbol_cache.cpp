#include "symbol_cache.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
constexpr uint32_t kFormatVersion = 9;  // bump when the layout or the meaning of entries changes
constexpr uint32_t kNoString = 0xFFFFFFFFu;
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 8;  // magic, version, reserved, payload size, checksum
constexpr size_t kIndexItem = 8 + 4;               // pc, record offset
constexpr size_t kFrameSize = 4 + 4 + 4 + 1 + 8;   // function, file, line, inlined, type argument size

enum EntryFlags : uint8_t { kFound = 1, kWithLines = 2, kHasStart = 4, kCoroutine = 8 };

// FNV-1a over 8-byte words (then the tail bytes): fast enough to check a
// multi-megabyte file at every load.
uint64_t checksum(const char* data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    hash = (hash ^ word) * 0x100000001b3ull;
  }
  for (; i < size; ++i) hash = (hash ^ static_cast<unsigned char>(data[i])) * 0x100000001b3ull;
  return hash;
}

uint64_t fnv1a(const std::string& text) { return checksum(text.data(), text.size()); }

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

// --- writing ---------------------------------------------------------------------
//
// Payload: strings (count, then offset and size of each, then the blob), the
// binary's path, the tag table, the entry index (pc and record offset, sorted
// by pc), the records. Little-endian as the machine writes it; a file from
// another architecture fails the checksum or the version and is rewritten.

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void u64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void bytes(const std::string& s) { out_ += s; }
  size_t size() const { return out_.size(); }
  std::string& text() { return out_; }

 private:
  std::string out_;
};

class StringTable {
 public:
  uint32_t index(const std::string& s) {
    if (s.empty()) return kNoString;
    auto found = index_.emplace(s, static_cast<uint32_t>(order_.size()));
    if (found.second) order_.push_back(&found.first->first);
    return found.first->second;
  }
  void write(Writer& w) const {
    w.u32(static_cast<uint32_t>(order_.size()));
    uint32_t offset = 0;
    for (const std::string* s : order_) {
      w.u32(offset);
      w.u32(static_cast<uint32_t>(s->size()));
      offset += static_cast<uint32_t>(s->size());
    }
    w.u32(offset);
    for (const std::string* s : order_) w.bytes(*s);
  }

 private:
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<const std::string*> order_;
};

void write_record(Writer& w, StringTable& strings, const CodeInfo& info) {
  w.u8(static_cast<uint8_t>((info.found ? kFound : 0) | (info.with_lines ? kWithLines : 0) |
                            (info.has_start ? kHasStart : 0) | (info.coroutine ? kCoroutine : 0)));
  w.u32(strings.index(info.function));
  w.u64(info.start);
  w.u32(static_cast<uint32_t>(info.frames.size()));
  for (const Frame& f : info.frames) {
    w.u32(strings.index(f.function));
    w.u32(strings.index(f.file));
    w.u32(f.line);
    w.u8(f.inlined ? 1 : 0);
    w.u64(f.type_argument_size);
  }
}

std::string encode_payload(const CacheContents& contents) {
  StringTable strings;
  std::vector<uint64_t> pcs;
  for (const auto& entry : contents.entries) pcs.push_back(entry.first);
  std::sort(pcs.begin(), pcs.end());
  Writer records, index, head;
  for (uint64_t pc : pcs) {
    index.u64(pc);
    index.u32(static_cast<uint32_t>(records.size()));
    write_record(records, strings, contents.entries.at(pc));
  }
  head.u32(strings.index(contents.binary));
  head.u8(contents.has_tags ? 1 : 0);
  head.u8(contents.tags.has_symtab ? 1 : 0);
  head.u32(static_cast<uint32_t>(contents.tags.tags.size()));
  for (const auto& tag : contents.tags.tags) {
    head.u64(tag.first);
    head.u32(strings.index(tag.second));
  }
  head.u32(static_cast<uint32_t>(contents.tags.typeinfos.size()));
  for (const auto& typeinfo : contents.tags.typeinfos) {
    head.u64(typeinfo.first);
    head.u32(strings.index(typeinfo.second));
  }
  head.u32(static_cast<uint32_t>(pcs.size()));
  Writer payload;
  strings.write(payload);
  payload.bytes(head.text());
  payload.bytes(index.text());
  payload.u32(static_cast<uint32_t>(records.size()));
  payload.bytes(records.text());
  return std::move(payload.text());
}

// --- reading ---------------------------------------------------------------------

// Bounds-checked reads from the payload; a failed read sets ok = false.
struct Cursor {
  const std::string& data;
  size_t pos = 0;
  bool ok = true;

  bool has(size_t size) {
    if (ok && pos <= data.size() && data.size() - pos >= size) return true;
    ok = false;
    return false;
  }
  template <class T>
  T get() {
    T value{};
    if (has(sizeof value)) std::memcpy(&value, data.data() + pos, sizeof value);
    pos += ok ? sizeof value : 0;
    return value;
  }
  void skip(size_t size) {
    if (has(size)) pos += size;
  }
};

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
  std::snprintf(key, sizeof key, "path-%016llx", static_cast<unsigned long long>(fnv1a(text)));
  return key;
}

std::string cache_file_path(const std::string& cache_dir, const std::string& key) {
  return cache_dir + "/symbols/" + key + ".htsym";
}

bool CacheReader::load(const std::string& file) {
  *this = CacheReader();
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < kHeaderSize || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) return false;
  uint32_t version = 0;
  uint64_t payload_size = 0, sum = 0;
  std::memcpy(&version, data.data() + 8, 4);
  std::memcpy(&payload_size, data.data() + 16, 8);
  std::memcpy(&sum, data.data() + 24, 8);
  if (version != kFormatVersion || payload_size != data.size() - kHeaderSize ||
      sum != checksum(data.data() + kHeaderSize, payload_size))
    return false;
  data_ = data.substr(kHeaderSize);
  if (parse()) return true;
  *this = CacheReader();
  return false;
}

// Finds the sections and decodes the tag table; entries wait until asked for.
bool CacheReader::parse() {
  Cursor c{data_};
  string_count_ = c.get<uint32_t>();
  strings_ = c.pos;
  if (!c.has(static_cast<size_t>(string_count_) * 8)) return false;
  c.skip(static_cast<size_t>(string_count_) * 8);
  blob_size_ = c.get<uint32_t>();
  blob_ = c.pos;
  c.skip(blob_size_);
  if (!c.ok) return false;
  binary_ = string_at(c.get<uint32_t>());
  has_tags_ = c.get<uint8_t>() != 0;
  tags_.has_symtab = c.get<uint8_t>() != 0;
  for (uint32_t n = c.get<uint32_t>(); n > 0 && c.has(12); --n) {
    uint64_t address = c.get<uint64_t>();
    tags_.tags[address] = string_at(c.get<uint32_t>());
  }
  for (uint32_t n = c.get<uint32_t>(); n > 0 && c.has(12); --n) {
    uint64_t address = c.get<uint64_t>();
    tags_.typeinfos[address] = string_at(c.get<uint32_t>());
  }
  entry_count_ = c.get<uint32_t>();
  index_ = c.pos;
  c.skip(static_cast<size_t>(entry_count_) * kIndexItem);
  records_size_ = c.get<uint32_t>();
  records_ = c.pos;
  c.skip(records_size_);
  return c.ok && c.pos == data_.size();
}

std::string CacheReader::string_at(uint32_t index) const {
  if (index == kNoString || index >= string_count_) return "";
  uint32_t offset, size;
  std::memcpy(&offset, data_.data() + strings_ + index * 8ull, 4);
  std::memcpy(&size, data_.data() + strings_ + index * 8ull + 4, 4);
  if (offset > blob_size_ || size > blob_size_ - offset) return "";
  return data_.substr(blob_ + offset, size);
}

bool CacheReader::decode_record(size_t offset, CodeInfo* out) const {
  if (offset >= records_size_) return false;
  Cursor c{data_, records_ + offset};
  uint8_t flags = c.get<uint8_t>();
  out->found = flags & kFound;
  out->with_lines = flags & kWithLines;
  out->has_start = flags & kHasStart;
  out->coroutine = flags & kCoroutine;
  out->function = string_at(c.get<uint32_t>());
  out->start = c.get<uint64_t>();
  uint32_t frames = c.get<uint32_t>();
  if (!c.has(static_cast<size_t>(frames) * kFrameSize)) return false;
  out->frames.resize(frames);
  for (Frame& f : out->frames) {
    f.function = string_at(c.get<uint32_t>());
    f.file = string_at(c.get<uint32_t>());
    f.line = c.get<uint32_t>();
    f.inlined = c.get<uint8_t>() != 0;
    f.type_argument_size = c.get<uint64_t>();
  }
  return c.ok;
}

bool CacheReader::find(uint64_t pc, CodeInfo* out) const {
  size_t low = 0, high = entry_count_;  // binary search over the sorted index
  const char* index = data_.data() + index_;
  while (low < high) {
    size_t middle = (low + high) / 2;
    uint64_t at;
    std::memcpy(&at, index + middle * kIndexItem, 8);
    if (at < pc) {
      low = middle + 1;
    } else if (at > pc) {
      high = middle;
    } else {
      uint32_t offset;
      std::memcpy(&offset, index + middle * kIndexItem + 8, 4);
      return decode_record(offset, out);
    }
  }
  return false;
}

CacheContents CacheReader::contents() const {
  CacheContents out;
  out.binary = binary_;
  out.has_tags = has_tags_;
  out.tags = tags_;
  const char* index = data_.data() + index_;
  for (uint32_t i = 0; i < entry_count_; ++i) {
    uint64_t pc;
    uint32_t offset;
    std::memcpy(&pc, index + i * kIndexItem, 8);
    std::memcpy(&offset, index + i * kIndexItem + 8, 4);
    CodeInfo info;
    if (decode_record(offset, &info)) out.entries[pc] = std::move(info);
  }
  return out;
}

bool write_cache_file(const std::string& file, const CacheContents& contents) {
  std::string directory = file.substr(0, file.rfind('/'));
  if (!make_directories(directory)) return false;
  std::string payload = encode_payload(contents);
  uint32_t version = kFormatVersion, reserved = 0;
  uint64_t size = payload.size(), sum = checksum(payload.data(), payload.size());
  std::string temporary = file + ".XXXXXX";
  int fd = mkstemp(&temporary[0]);
  if (fd < 0) return false;
  std::string header(kMagic, sizeof kMagic);
  header.append(reinterpret_cast<const char*>(&version), 4);
  header.append(reinterpret_cast<const char*>(&reserved), 4);
  header.append(reinterpret_cast<const char*>(&size), 8);
  header.append(reinterpret_cast<const char*>(&sum), 8);
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
