#include <algorithm>
#include <cstdio>

#include "exports.hpp"
#include "json_text.hpp"

namespace heaptype {
namespace core {
namespace {

void append_number(std::string* out, const char* key, uint64_t value) {
  char buf[64];
  snprintf(buf, sizeof buf, "\"%s\": %llu, ", key, static_cast<unsigned long long>(value));
  *out += buf;
}

void append_figures(std::string* out, const Figures& f, uint64_t tick_ns) {
  append_number(out, "allocations", f.allocations);
  append_number(out, "objects", f.objects);
  append_number(out, "bytes", f.bytes);
  append_number(out, "peak_bytes", f.peak_bytes);
  append_number(out, "peak_time_us", f.peak_time * tick_ns / 1000);
  append_number(out, "live_bytes", f.live_bytes);
  append_number(out, "live_blocks", f.live_blocks);
  append_number(out, "temporary_allocations", f.temporary_allocations);
}

const std::string& node_name(const Analysis& a, const MergedTree::Node& n) {
  return n.kind == MergedTree::kType ? a.strings().get(a.types()[n.label].label) : a.strings().get(n.label);
}

// Opens a node's object, up to and including `"children": [`.
void open_node(std::string* out, const Analysis& a, const MergedTree::Node& n) {
  *out += "{";
  if (n.kind == MergedTree::kType) {
    const TypeGroup& g = a.types()[n.label];
    *out += "\"type\": ";
    if (g.name) {
      append_json_string(out, a.strings().get(g.name));
    } else {
      *out += "null";
    }
    *out += g.inferred ? ", \"inferred\": true, " : ", \"inferred\": false, ";
    append_figures(out, n.total, a.clock_tick_ns());
  } else {
    *out += "\"frame\": ";
    append_json_string(out, a.strings().get(n.label));
    *out += n.inlined ? ", \"inlined\": true, " : ", \"inlined\": false, ";
    append_figures(out, n.total, a.clock_tick_ns());
    *out += "\"self\": {";
    append_figures(out, n.self, a.clock_tick_ns());
    out->resize(out->size() - 2);
    *out += "}, ";
  }
  *out += "\"children\": [";
}

}  // namespace

bool figure_by_name(const Figures& f, const std::string& name, uint64_t* value) {
  if (name == "bytes") *value = f.bytes;
  else if (name == "allocations") *value = f.allocations;
  else if (name == "objects") *value = f.objects;
  else if (name == "peak") *value = f.peak_bytes;
  else if (name == "live") *value = f.live_bytes;
  else if (name == "temporary") *value = f.temporary_allocations;
  else return false;
  return true;
}

bool tree_json(const Analysis& a, bool bottom_up, const std::string& sort, uint32_t top, std::string* out) {
  uint64_t probe;
  if (!figure_by_name(Figures(), sort, &probe)) return false;
  const MergedTree& tree = bottom_up ? a.bottom_up_tree() : a.tree();
  const auto& children = tree.children();
  auto sorted_children = [&](uint32_t id) {
    std::vector<uint32_t> list = children[id];
    std::stable_sort(list.begin(), list.end(), [&](uint32_t x, uint32_t y) {
      uint64_t vx = 0, vy = 0;
      figure_by_name(tree.node(x).total, sort, &vx);
      figure_by_name(tree.node(y).total, sort, &vy);
      if (vx != vy) return vx > vy;
      return node_name(a, tree.node(x)) < node_name(a, tree.node(y));
    });
    if (top && list.size() > top) list.resize(top);
    return list;
  };
  struct Level {
    std::vector<uint32_t> children;
    size_t next;
  };
  std::vector<Level> stack;
  stack.push_back(Level{sorted_children(0), 0});
  *out += "[";
  while (!stack.empty()) {
    Level& level = stack.back();
    if (level.next == level.children.size()) {
      stack.pop_back();
      *out += stack.empty() ? "]" : "]}";
      continue;
    }
    uint32_t id = level.children[level.next++];
    if (level.next > 1) *out += ", ";
    open_node(out, a, tree.node(id));
    stack.push_back(Level{sorted_children(id), 0});
  }
  return true;
}

bool folded(const Analysis& a, const std::string& value, std::string* out) {
  uint64_t probe;
  if (!figure_by_name(Figures(), value, &probe)) return false;
  const MergedTree& tree = a.tree();
  auto clean = [](std::string name) {
    for (char& c : name)
      if (c == ';') c = ':';
      else if (c == '\n') c = ' ';
    return name;
  };
  std::vector<std::string> lines;
  std::vector<uint32_t> path;
  for (uint32_t id = 1; id < tree.size(); ++id) {
    const MergedTree::Node& leaf = tree.node(id);
    if (leaf.kind != MergedTree::kType) continue;
    uint64_t amount = 0;
    figure_by_name(leaf.total, value, &amount);
    if (!amount) continue;
    path.clear();
    for (uint32_t n = leaf.parent; n != 0 && n != kNone; n = tree.node(n).parent) path.push_back(n);
    std::string line;
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      const MergedTree::Node& frame = tree.node(*it);
      line += clean(a.strings().get(frame.label));
      if (frame.inlined) line += "_[i]";
      line += ';';
    }
    line += clean(a.strings().get(a.types()[leaf.label].label));
    line += ' ';
    line += std::to_string(amount);
    line += '\n';
    lines.push_back(std::move(line));
  }
  std::sort(lines.begin(), lines.end());
  for (const std::string& line : lines) *out += line;
  return true;
}

}  // namespace core
}  // namespace heaptype
