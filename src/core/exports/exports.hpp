// exports.hpp: a profile's call paths in the formats other tools read, and the
// merged call tree as JSON. All of them are written here, in C++, from one
// analysis (whose filters they follow); none of them recurses.
//
// * pprof_proto: pprof's profile.proto (uncompressed; the caller gzips), sample
//   types alloc_objects, alloc_space, inuse_objects, inuse_space, the type of each
//   sample as label `type` (`inferred` = `true` when inferred), the thread as label
//   `thread`, functions, locations (inlined frames as extra lines) and mappings.
// * pprof_text: gperftools' legacy heap profile (`google-pprof PROGRAM FILE`); it has
//   no room for types.
// * folded: `frame;frame;...;type value` lines for flamegraph.pl, root first, the
//   type as the leaf, inlined frames with flamegraph.pl's `_[i]` suffix; from the
//   merged tree, so `peak` values are exact peaks of each (path, type).
// * tree_json: the merged call tree as nested JSON objects.
#ifndef HEAPTYPE_CORE_EXPORTS_EXPORTS_HPP
#define HEAPTYPE_CORE_EXPORTS_EXPORTS_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "../analysis.hpp"

namespace heaptype {
namespace core {

struct ExportMapping {
  uint64_t start = 0, limit = 0, offset = 0;
  std::string path;
  std::string build_id;
};

struct PprofInfo {
  std::vector<ExportMapping> mappings;  // executable ones, the main binary first
  std::string comment;
  uint64_t time_unix_ns = 0;
};

std::string pprof_proto(const Analysis& analysis, const PprofInfo& info);

// One process of a fleet's merged pprof profile: its analysis, its own mappings
// (its load addresses), and the name its samples carry as label `process`.
struct PprofProcess {
  const Analysis* analysis;
  PprofInfo info;
  std::string name;
};

// One pprof profile of several processes of one program: samples of every process
// (figures add up in pprof's views), each process's addresses moved to the load
// addresses of the first process that mapped that module. The mappings are the
// union; duration is the longest process's, time the earliest start.
std::string pprof_proto_merged(const std::vector<PprofProcess>& processes, const std::string& comment);
std::string pprof_text(const Analysis& analysis, const std::string& module_map);

// `value`: bytes, allocations, objects, peak, live, temporary.
bool folded(const Analysis& analysis, const std::string& value, std::string* out);

// The merged tree (bottom_up: the reversed one) as a JSON list of the root's
// children. `sort` orders siblings (bytes, allocations, objects, peak, live,
// temporary); `top` keeps that many children per node (0: all).
bool tree_json(const Analysis& analysis, bool bottom_up, const std::string& sort, uint32_t top, std::string* out);

// The figure `name` (as for folded and tree_json) of a Figures; false if unknown.
bool figure_by_name(const Figures& f, const std::string& name, uint64_t* value);

}  // namespace core
}  // namespace heaptype

#endif
