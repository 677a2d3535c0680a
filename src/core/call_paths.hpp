// call_paths.hpp: the call path of each allocation, as named frames.
//
// The runtime gives every allocation a calling context: a node of its thread's
// calling-context tree (one node per function entered, from the
// -finstrument-functions hooks, or per return address of a walked stack) and the
// return address of the allocation call itself. Here they become paths of named
// frames, root first:
//
// * a node the hooks recorded is the function it entered; a node of a walked stack
//   is the function holding its return address, with the functions DWARF says were
//   inlined there;
// * the allocation's call site adds the function that made the call when the hooks
//   did not see it (code built without instrumentation), and with `inlined` the
//   functions inlined at the call site (std::vector<T>::push_back ->
//   _M_realloc_insert -> std::__new_allocator<T>::allocate); frames the hooks
//   already recorded are not repeated;
// * a walked stack starts in the C runtime (_start, __libc_start_main, clone,
//   start_thread, std::thread's trampolines): those leading frames are dropped, so
//   paths start at main or at the thread's function, as with the hooks.
//
// Paths are persistent lists: a node's path shares its parent's cells, so memory
// grows with the number of nodes, not with their depth (a recursion 100,000 deep
// works), and nothing here recurses.
#ifndef HEAPTYPE_CORE_CALL_PATHS_HPP
#define HEAPTYPE_CORE_CALL_PATHS_HPP

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "../format/event_decoder.hpp"
#include "code_names.hpp"
#include "string_table.hpp"

namespace heaptype {
namespace core {

constexpr uint32_t kNone = 0xffffffffu;

struct PathFrame {
  uint32_t name = 0;     // interned function name
  uint64_t pc = 0;       // inside the call to the next frame when `call`, else the function's entry
  uint32_t file = 0;     // interned, 0 unknown
  uint32_t line = 0;
  uint32_t module = 0;   // interned, 0 unknown
  bool call = false;
  bool inlined = false;  // DWARF: inlined into the frame before it
  bool hooked = false;   // recorded by the instrumentation hooks
};

struct PathCell {
  PathFrame frame;
  uint32_t prev;   // the cell of the frame before it, kNone at the root
  uint32_t depth;  // frames from the root, this one included
};

class CallPaths {
 public:
  CallPaths(CodeNames* names, StringTable* strings, bool inlined);

  // The last cell of an allocation's path (kNone when nothing is known of it).
  uint32_t context_path(uint32_t thread, const std::vector<format::NodeDef>& nodes, uint64_t node,
                        uint64_t call_site);
  const PathCell& cell(uint32_t index) const { return cells_[index]; }
  // The frames of a path, root first.
  std::vector<const PathFrame*> frames(uint32_t path) const;
  uint32_t no_call_site_name() const { return no_call_site_; }
  // A frame named by its module and offset: the module has no symbol for it.
  bool is_unnamed(const PathFrame& frame) const;

 private:
  uint32_t node_path(uint32_t thread, const std::vector<format::NodeDef>& nodes, uint64_t node);
  uint32_t extend_node(uint32_t path, const format::NodeDef& def, bool walked);
  uint32_t extended(uint32_t path, const format::NodeDef& def);
  uint32_t push(uint32_t path, const PathFrame& frame, bool walked);
  uint32_t merge_chain(uint32_t path, const std::vector<PathFrame>& chain, bool keep_inlined, bool walked);
  std::vector<PathFrame> chain_frames(const CodeInfo& info, uint64_t pc);
  uint32_t function_key(uint32_t name);
  bool is_startup_frame(const PathFrame& frame);
  // Whether a chain of frames at one address has code other than start-up code inlined.
  bool inlines_program_code(const std::vector<PathFrame>& chain);
  bool is_entry_frame(const PathFrame& frame);

  // A walked path begins with the frames that start a process or thread (_start,
  // __libc_start_call_main, start_thread, std::thread's machinery...), left out: from
  // its entry frame on, the path is this mark until the first frame of the program's
  // own. A walk that never reached an entry (cut short in code that keeps no frame
  // pointer) keeps every frame it found.
  static constexpr uint32_t kStartupOnly = kNone - 1;
  // The same, right after the frame of glibc's that calls main: the next one is main's.
  static constexpr uint32_t kMainNext = kNone - 2;
  static bool is_empty(uint32_t path) { return path >= kMainNext; }
  static bool in_startup(uint32_t path) { return path == kStartupOnly || path == kMainNext; }
  bool calls_main(const PathFrame& frame) const;

  CodeNames* names_;
  StringTable* strings_;
  bool inlined_;
  std::vector<PathCell> cells_;
  std::unordered_map<uint64_t, uint32_t> node_paths_;  // (thread, node) -> last cell
  // A path and what extends it -> the extended path's last cell. A runtime that forgets
  // its nodes writes a path met again under new numbers (and every thread numbers its
  // own): the same frames get the same cells, so that memory and the trees grow with
  // the distinct paths, not with the definitions (rapidjson's recursive parser
  // preloaded: a new definition at nearly every allocation).
  struct Extension {
    uint32_t path;
    uint64_t function;
    uint64_t call_site;
    bool operator==(const Extension& o) const {
      return path == o.path && function == o.function && call_site == o.call_site;
    }
  };
  struct ExtensionHash {
    size_t operator()(const Extension& e) const {
      uint64_t h = (e.path * 0x9E3779B97F4A7C15ull) ^ (e.function * 0xC2B2AE3D27D4EB4Full) ^ e.call_site;
      return static_cast<size_t>(h ^ (h >> 31));
    }
  };
  std::unordered_map<Extension, uint32_t, ExtensionHash> extensions_;
  std::unordered_map<Extension, uint32_t, ExtensionHash> context_paths_;  // function: walked or not
  std::unordered_map<uint32_t, uint32_t> function_keys_;  // name -> name without parameters
  std::unordered_map<uint32_t, bool> startup_modules_;
  uint32_t no_call_site_;
  uint32_t walk_cut_;
  uint32_t main_;  // the root frame of a stack walked only to its 128 innermost frames
};

}  // namespace core
}  // namespace heaptype

#endif
