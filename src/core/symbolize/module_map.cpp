#include "module_map.hpp"

#include <algorithm>
#include <cctype>
#include <map>

namespace heaptype {
namespace symbolize {
namespace {

// The page rounding is read from a mapping's file offset; a rounding beyond
// the largest page size in use means the offset cannot tell, and the common
// 4 KiB page is assumed instead.
constexpr uint64_t kMaxPageSize = 1 << 16;
constexpr uint64_t kFallbackPageSize = 4096;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// A cursor over one line; each read fails (returns false) rather than throwing.
struct LineReader {
  const std::string& line;
  size_t pos = 0;

  bool hex(uint64_t* out) {
    size_t begin = pos;
    uint64_t value = 0;
    while (pos < line.size() && std::isxdigit(static_cast<unsigned char>(line[pos]))) {
      char c = static_cast<char>(std::tolower(static_cast<unsigned char>(line[pos])));
      value = value * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
      ++pos;
    }
    *out = value;
    return pos > begin;
  }
  bool literal(char c) {
    if (pos >= line.size() || line[pos] != c) return false;
    ++pos;
    return true;
  }
  bool spaces() {
    size_t begin = pos;
    while (pos < line.size() && is_space(line[pos])) ++pos;
    return pos > begin;
  }
  bool word(std::string* out) {
    size_t begin = pos;
    while (pos < line.size() && !is_space(line[pos])) ++pos;
    if (out) out->assign(line, begin, pos - begin);
    return pos > begin;
  }
  bool decimal() {
    size_t begin = pos;
    while (pos < line.size() && std::isdigit(static_cast<unsigned char>(line[pos]))) ++pos;
    return pos > begin;
  }
  std::string rest_trimmed() const {
    size_t end = line.size();
    while (end > pos && is_space(line[end - 1])) --end;
    return line.substr(pos, end - pos);
  }
};

// "55d0c4a00000-55d0c4a01000 r--p 00000000 fe:00 2146484    /opt/my app/bin"
bool parse_line(const std::string& line, Mapping* out) {
  LineReader r{line};
  if (!r.hex(&out->start) || !r.literal('-') || !r.hex(&out->end) || !r.spaces()) return false;
  if (!r.word(&out->perms) || !r.spaces() || !r.hex(&out->offset) || !r.spaces()) return false;
  if (!r.word(nullptr) || !r.spaces() || !r.decimal() || !r.spaces()) return false;  // device, inode
  out->path = r.rest_trimmed();
  return !out->path.empty() && out->path[0] == '/';
}

}  // namespace

std::vector<Mapping> parse_module_map(const std::string& text) {
  std::vector<Mapping> out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    Mapping mapping;
    if (parse_line(text.substr(begin, end - begin), &mapping)) out.push_back(std::move(mapping));
    begin = end + 1;
  }
  return out;
}

namespace {

// The bias that puts `first` (the lowest segment) in `candidate`, a mapping of the
// page holding its start; false when the mapping's file offset cannot hold it.
bool bias_from(const Segment& first, const Mapping& candidate, uint64_t* bias) {
  if (first.offset < candidate.offset || first.offset - candidate.offset >= kMaxPageSize) return false;
  uint64_t rounding = first.offset - candidate.offset;
  *bias = candidate.start - (first.vaddr - rounding);
  return true;
}

// True when, loaded at `bias`, the first byte of every segment lies in a mapping
// that maps it from the segment's own file offset.
bool segments_fit(const std::vector<Segment>& segments, const std::vector<Mapping>& mappings, uint64_t bias) {
  for (const Segment& s : segments) {
    if (s.memsz == 0) continue;
    uint64_t at = bias + s.vaddr;
    bool mapped = std::any_of(mappings.begin(), mappings.end(), [&](const Mapping& m) {
      return m.start <= at && at < m.end && m.offset + (at - m.start) == s.offset;
    });
    if (!mapped) return false;
  }
  return true;
}

}  // namespace

uint64_t load_bias(const std::vector<Segment>& segments, const std::vector<Mapping>& mappings) {
  const Segment& first = segments.front();
  // A plain mapping of the file (a reader's, right against the image) can come
  // first: the image is where every segment lies at its own file offset.
  std::vector<const Mapping*> by_address;
  for (const Mapping& m : mappings) by_address.push_back(&m);
  std::sort(by_address.begin(), by_address.end(), [](const Mapping* a, const Mapping* b) { return a->start < b->start; });
  for (const Mapping* candidate : by_address) {
    uint64_t bias;
    if (bias_from(first, *candidate, &bias) && segments_fit(segments, mappings, bias)) return bias;
  }
  // None fits (a file changed since): the lowest mapping holds the first segment.
  const Mapping& lowest = *by_address.front();
  uint64_t bias;
  if (bias_from(first, lowest, &bias)) return bias;
  return lowest.start - (first.vaddr - first.vaddr % kFallbackPageSize);
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

namespace {

// A file can be mapped more than once: a process that reads its own libraries (the
// in-process pytest markers profile the Python process, whose symbolizer maps them)
// holds a plain mapping of a library beside its loaded image, often right against
// it. A mapping at file offset 0 starts a copy unless it continues a one-page
// mapping of another kind from offset 0 (a small image can map several segments
// from offset 0, one after the other: lld packs them); the loaded image is the
// copy that holds executable code.
bool continues_packed_image(const Mapping& before, const Mapping& m) {
  return m.start == before.end && before.offset == 0 && before.perms != m.perms && before.end - before.start <= kMaxPageSize;
}

std::vector<Mapping> loaded_image(std::vector<Mapping> mappings) {
  std::sort(mappings.begin(), mappings.end(), [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  size_t starts = std::count_if(mappings.begin(), mappings.end(), [](const Mapping& m) { return m.offset == 0; });
  if (starts < 2) return mappings;
  std::vector<std::vector<Mapping>> copies(1);
  for (const Mapping& m : mappings) {
    if (m.offset == 0 && !copies.back().empty() && !continues_packed_image(copies.back().back(), m))
      copies.emplace_back();
    copies.back().push_back(m);
  }
  for (const auto& copy : copies)
    for (const Mapping& m : copy)
      if (m.perms.find('x') != std::string::npos) return copy;
  return mappings;
}

}  // namespace

std::vector<MappedFile> group_by_file(const std::vector<Mapping>& mappings) {
  std::map<std::string, std::vector<Mapping>> by_path;
  for (const Mapping& m : mappings) by_path[m.path].push_back(m);
  std::vector<MappedFile> out;
  for (auto& entry : by_path) {
    MappedFile file;
    file.path = entry.first;
    file.mappings = loaded_image(std::move(entry.second));
    file.low = file.mappings.front().start;
    for (const Mapping& m : file.mappings) {
      file.low = std::min(file.low, m.start);
      file.high = std::max(file.high, m.end);
    }
    out.push_back(std::move(file));
  }
  std::sort(out.begin(), out.end(), [](const MappedFile& a, const MappedFile& b) { return a.low < b.low; });
  return out;
}

}  // namespace symbolize
}  // namespace heaptype
