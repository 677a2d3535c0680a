// merged_tree.hpp: call paths merged into one tree of frames, by name: two
// threads, or two call sites in one function, that reach the same functions share
// a node. Each node counts the allocations made under it (its subtree) and those
// made by the frame itself; a node's peak is the most bytes its subtree held live
// at any one moment, tracked event by event.
#ifndef HEAPTYPE_CORE_MERGED_TREE_HPP
#define HEAPTYPE_CORE_MERGED_TREE_HPP

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "call_paths.hpp"
#include "figures.hpp"

namespace heaptype {
namespace core {

class MergedTree {
 public:
  enum Kind : uint8_t { kRoot, kFrame, kType };

  struct Node {
    uint32_t parent;
    uint32_t label;           // kFrame: interned function name; kType: the type group
    Kind kind;
    bool inlined;             // a frame DWARF says was inlined (and the hooks did not see)
    bool first_of_function;   // no ancestor is the same function: counts for its total
    uint32_t depth;
    uint32_t group;           // kFrame: the analysis's function group
    Figures total;            // allocations made under this node
    Figures self;             // allocations whose path ends here
  };

  MergedTree() { nodes_.push_back(Node{kNone, 0, kRoot, false, false, 0, kNone, {}, {}}); }

  uint32_t child(uint32_t parent, Kind kind, uint32_t label, bool inlined);
  const Node& node(uint32_t id) const { return nodes_[id]; }
  Node& node(uint32_t id) { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  // Children of every node, in creation order (built once, after the analysis).
  const std::vector<std::vector<uint32_t>>& children() const;

 private:
  static uint64_t key(uint32_t parent, Kind kind, uint32_t label) {
    return (static_cast<uint64_t>(parent) << 32) ^ (static_cast<uint64_t>(kind) << 30) ^ label;
  }

  std::vector<Node> nodes_;
  std::unordered_multimap<uint64_t, uint32_t> index_;
  mutable std::vector<std::vector<uint32_t>> children_;
  mutable size_t children_built_for_ = 0;
};

}  // namespace core
}  // namespace heaptype

#endif
