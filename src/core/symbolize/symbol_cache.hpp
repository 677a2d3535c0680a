// symbol_cache.hpp: the on-disk symbol cache, one file per binary.
//
// A file holds what was learnt about one build of one module: what each
// link-time pc is (CodeInfo) and the module's type-tag table from its ELF
// symbols, so that a second report of the same build reads no DWARF and no
// symbol table. Files are named by the GNU build id, else by a hash of the
// real path, size and modification time, and live in <dir>/symbols/. The
// format is binary with a checksum: a truncated or corrupt file is ignored
// (and rewritten by the next save). Writes go to a temporary file renamed into
// place, so readers never see half a file.
#ifndef HEAPTYPE_CORE_SYMBOLIZE_SYMBOL_CACHE_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_SYMBOL_CACHE_HPP

#include <cstdint>
#include <string>
#include <unordered_map>

#include "location.hpp"
#include "type_tags.hpp"

namespace heaptype {
namespace symbolize {

// Options::cache_dir's default: resolve it with the environment.
extern const char kDefaultCacheDir[];

// $HEAPTYPE_CACHE_DIR (empty, off, 0, none or no: caching off, ""), else
// $XDG_CACHE_HOME/heaptype, else ~/.cache/heaptype.
std::string default_cache_dir();

// kDefaultCacheDir -> default_cache_dir(); anything else as given ("" = off).
std::string resolve_cache_dir(const std::string& option);

// "<build id>", else "path-<16 hex digits>" from the file's real path, size and
// modification time (a rebuild at the same path gets a new key).
std::string cache_key(const std::string& build_id, const std::string& path);

// <cache_dir>/symbols/<key>.htsym
std::string cache_file_path(const std::string& cache_dir, const std::string& key);

struct CacheContents {
  std::string binary;  // the module's path when written, for people reading the folder
  bool has_tags = false;
  ElfTags tags;
  std::unordered_map<uint64_t, CodeInfo> entries;  // link-time pc -> what it is
};

// A cache file held in memory: the tag table is decoded at once, an entry only
// when asked for (a binary shared by many test programs gathers entries that
// one report does not need).
class CacheReader {
 public:
  // False, leaving the reader empty, when the file is missing, unreadable,
  // truncated, corrupt or of another format version.
  bool load(const std::string& file);
  bool loaded() const { return !data_.empty(); }
  size_t size() const { return entry_count_; }
  bool has_tags() const { return has_tags_; }
  const ElfTags& tags() const { return tags_; }
  // The entry of pc, decoded; false when the file has none.
  bool find(uint64_t pc, CodeInfo* out) const;
  // Everything, decoded (to merge before writing).
  CacheContents contents() const;

 private:
  bool parse();
  std::string string_at(uint32_t index) const;
  bool decode_record(size_t offset, CodeInfo* out) const;

  std::string data_;  // the payload
  size_t strings_ = 0, blob_ = 0, blob_size_ = 0, index_ = 0, records_ = 0, records_size_ = 0;
  uint32_t string_count_ = 0, entry_count_ = 0;
  std::string binary_;
  bool has_tags_ = false;
  ElfTags tags_;
};

// Writes atomically; false when the directory cannot be written (a read-only
// cache costs time, not results).
bool write_cache_file(const std::string& file, const CacheContents& contents);

// Adds to `ours` what `theirs` knows and `ours` does not (another process may
// have saved entries meanwhile); an entry with lines beats one without.
void merge_cache_contents(CacheContents& ours, CacheContents&& theirs);

}  // namespace symbolize
}  // namespace heaptype

#endif
