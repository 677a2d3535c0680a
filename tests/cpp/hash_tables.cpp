// hash_tables.cpp: abseil's Swiss tables and a btree, for the rows of their backing
// arrays (tests/python/test_hash_tables.py). Each table is one block of an alignment
// type (absl::container_internal::AlignedType<8>), a new one each time the capacity
// changes; the program counts those changes, the blocks' truth, and prints them:
//
//   flat=F node=N set=S inner=I outer=O nodes=P
//
// F: tables of flat_hash_map<int, Foo>; N: of node_hash_map<int, Foo> (P nodes of
// std::pair<const int, Foo> beside them); S: of flat_hash_set<long>; I: of the
// flat_hash_set<int> values of a flat_hash_map<int, flat_hash_set<int>>, built and then
// copied (the copy's inner tables are allocated inside the outer map's copy
// constructor: the nearest table is theirs); O: of that outer map and its copy. A
// btree_set<int>'s nodes come from the same allocation function: nodes, not tables.
#ifdef HEAPTYPE_NEW_HPP
#include <heaptype/undef_new.h>  // abseil's headers call ::operator new by name
#endif
#include <absl/container/btree_set.h>
#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/container/node_hash_map.h>
#ifdef HEAPTYPE_NEW_HPP
#include <heaptype/define_new.h>
#endif

#include <cstdio>

struct Foo {
  long a, b, c;
};

namespace {

// Inserts keys 0..n-1 through `insert`, counting the capacities the table takes.
template <class Table, class Insert>
long fill(Table& table, int n, Insert insert) {
  long tables = 0;
  size_t capacity = table.capacity();
  for (int i = 0; i < n; ++i) {
    insert(table, i);
    if (table.capacity() != capacity) ++tables;
    capacity = table.capacity();
  }
  return tables;
}

}  // namespace

int main() {
  long flat_tables, node_tables, set_tables, inner_tables = 0, outer_tables = 0, nodes;
  {
    absl::flat_hash_map<int, Foo> flat;
    flat_tables = fill(flat, 1000, [](auto& t, int i) { t[i] = Foo{i, i, i}; });
    absl::node_hash_map<int, Foo> node;
    node_tables = fill(node, 100, [](auto& t, int i) { t[i] = Foo{i, i, i}; });
    nodes = static_cast<long>(node.size());
    absl::flat_hash_set<long> set;
    set_tables = fill(set, 50, [](auto& t, int i) { t.insert(i * 7L); });
    absl::flat_hash_map<int, absl::flat_hash_set<int>> outer;
    for (int k = 0; k < 20; ++k) {
      size_t capacity = outer.capacity();
      inner_tables += fill(outer[k], 10 + k, [](auto& t, int i) { t.insert(i); });
      if (outer.capacity() != capacity) ++outer_tables;
    }
    absl::flat_hash_map<int, absl::flat_hash_set<int>> copy(outer);
    ++outer_tables;  // the copy reserves its table once
    for (const auto& entry : copy) inner_tables += entry.second.empty() ? 0 : 1;  // one reserved table each
    absl::btree_set<int> tree;
    for (int i = 0; i < 500; ++i) tree.insert(i);
    if (copy.size() != outer.size() || tree.size() != 500) return 1;
  }
  std::printf("flat=%ld node=%ld set=%ld inner=%ld outer=%ld nodes=%ld\n", flat_tables, node_tables, set_tables,
              inner_tables, outer_tables, nodes);
  return 0;
}
