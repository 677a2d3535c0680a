#include "merged_tree.hpp"

namespace heaptype {
namespace core {

uint32_t MergedTree::child(uint32_t parent, Kind kind, uint32_t label, bool inlined) {
  uint64_t k = key(parent, kind, label);
  auto range = index_.equal_range(k);
  for (auto it = range.first; it != range.second; ++it) {
    const Node& n = nodes_[it->second];
    if (n.parent == parent && n.kind == kind && n.label == label) return it->second;
  }
  bool first = kind == kFrame;
  if (first) {
    // Walked once per node: a recursion counts once in its function's total.
    for (uint32_t a = parent; a != kNone && first; a = nodes_[a].parent)
      first = !(nodes_[a].kind == kFrame && nodes_[a].label == label);
  }
  uint32_t id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(Node{parent, label, kind, inlined, first, nodes_[parent].depth + 1, kNone, {}, {}});
  index_.emplace(k, id);
  return id;
}

const std::vector<std::vector<uint32_t>>& MergedTree::children() const {
  if (children_built_for_ != nodes_.size()) {
    children_.assign(nodes_.size(), {});
    for (uint32_t id = 1; id < nodes_.size(); ++id) children_[nodes_[id].parent].push_back(id);
    children_built_for_ = nodes_.size();
  }
  return children_;
}

}  // namespace core
}  // namespace heaptype
