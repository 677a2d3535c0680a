// type_inference.hpp: a type for an untyped allocation, read from the functions
// at its call site. Code built without HeapType's header (libstdc++.so's
// out-of-line templates, a library nobody rebuilt) allocates untyped, but when the
// allocating frame is a standard allocator or factory its name says the type:
// std::__new_allocator<T>::allocate, std::make_shared<T>, any member of
// std::basic_string<C> (its buffer: "C[] of std::string", as the typed headers name
// it). Such a type is marked inferred. Blocks of the C and C++ runtimes' own code get
// a row naming the library instead (InferredType::library).
#ifndef HEAPTYPE_CORE_TYPE_INFERENCE_HPP
#define HEAPTYPE_CORE_TYPE_INFERENCE_HPP

#include <cstdint>
#include <string>

#include "code_names.hpp"

namespace heaptype {
namespace core {

struct InferredType {
  std::string name;   // "" when nothing was inferred
  uint64_t size = 0;  // sizeof(T) when known
  // `name` is not a C++ type but a row for what a C or C++ runtime allocates in code
  // built without HeapType ("glibc: stdio buffer", "libstdc++: std::locale"), by the
  // function that allocates, or for a coroutine's frame ("coroutine frame of
  // counter(int)"); such a row is not marked inferred.
  bool library = false;
  // Bytes in front of the objects in each block (a copy-on-write string's _Rep), not
  // counted as objects.
  uint64_t header = 0;

  // How many T `count` blocks of `bytes` in all hold: their bytes after the headers
  // / sizeof(T) when that divides, else one per block.
  uint64_t objects(uint64_t count, uint64_t bytes) const;

  // The row for blocks of `bytes` each: `name`, except for a block libstdc++ allocates
  // at start-up in a function without a symbol whose size is that of its emergency
  // exception pool (GCC 12: 64 x 1 KiB objects + 64 x 112 B dependent exceptions,
  // 72,704 B): "libstdc++: emergency exception pool".
  const std::string& row(uint64_t bytes) const;
};

// The innermost standard allocator or factory frame at the call site decides. A
// coroutine's ramp (the function that starts it) that calls the allocator itself
// allocates the coroutine's frame: the compiler's, which no new-expression names.
InferredType infer_type(const CodeInfo& call_site);

// For one function name: the type it allocates, and whether that is the frame's
// own first template argument (its DWARF size is then sizeof(T)).
bool type_from_function(const std::string& function, std::string* type, bool* own_argument);

// A hash table's backing array. parallel-hashmap's and abseil's Swiss tables allocate
// their control bytes and slots in one block, as an array of an alignment type:
// `phmap::priv::Allocate<8ul, std::allocator<T>>(...)::M` (local to the allocation
// function; abseil's before 2025 too), `absl::container_internal::AlignedType<8ul>`
// (abseil's now). That is the block's true static type, but it names neither the table
// nor what it holds; the raw_hash_set frame that allocates it does. The libraries' btree
// nodes come from the same allocation function and are left as they are.
bool hash_table_storage(const std::string& type);

// What a frame on such a block's path says, walking out from the allocation: kTable
// (a member of the raw_hash_set of a container's policy; `row` is then "table of
// phmap::flat_hash_map<int, Foo>"), kInside (the allocation's own machinery, or the
// library's internals around it: walk on) or kOutside (anything else, a btree's code
// included: the block is no hash table's, or not one this walk can name).
enum class TableFrame { kTable, kInside, kOutside };
TableFrame hash_table_frame(const std::string& function, std::string* row);

}  // namespace core
}  // namespace heaptype

#endif
