// module_map.hpp: the profiled process's module map (its /proc/self/maps lines
// naming files) and the load bias of each module.
#ifndef HEAPTYPE_CORE_SYMBOLIZE_MODULE_MAP_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_MODULE_MAP_HPP

#include <cstdint>
#include <string>
#include <vector>

namespace heaptype {
namespace symbolize {

// One line of /proc/self/maps that is backed by a file.
struct Mapping {
  uint64_t start = 0, end = 0, offset = 0;
  std::string perms, path;
  bool operator==(const Mapping& o) const {
    return start == o.start && end == o.end && offset == o.offset && perms == o.perms && path == o.path;
  }
};

// Parses /proc/self/maps text ("start-end perms offset dev inode path", hex),
// keeping the mappings of files: anonymous memory, [heap], [stack], [vdso] are
// dropped, and so is any line that is not a maps line.
std::vector<Mapping> parse_module_map(const std::string& text);

// A PT_LOAD segment of an ELF file.
struct Segment {
  uint64_t vaddr = 0, offset = 0, memsz = 0;
};

// Runtime address - link-time address of one module, from its PT_LOAD segments
// (sorted by vaddr, at least one) and its mappings (at least one). The lowest
// mapping holds the first segment, mapped from its p_vaddr rounded down to a
// page; how far it was rounded is read from the mapping's file offset, so the
// result does not depend on the profiled machine's page size. Wraps modulo 2^64.
uint64_t load_bias(const std::vector<Segment>& segments, const std::vector<Mapping>& mappings);

// The mappings of one file, grouped, with the address range they cover.
struct MappedFile {
  std::string path;
  std::vector<Mapping> mappings;
  uint64_t low = 0, high = 0;  // [lowest start, highest end)
};

// The file name of a path: "/usr/lib/libc.so.6" -> "libc.so.6".
std::string base_name(const std::string& path);

// Groups mappings by path, sorted by their lowest address. Of a file mapped more
// than once (a process that also reads it), the loaded image alone.
std::vector<MappedFile> group_by_file(const std::vector<Mapping>& mappings);

}  // namespace symbolize
}  // namespace heaptype

#endif
