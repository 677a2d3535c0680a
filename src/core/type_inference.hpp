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
  // `name` is a library container's storage (container_storage below): its row is the
  // container's, read from the block's call path.
  bool container_storage = false;
  // `name` is "<library>: function without a symbol": the row may be its named caller's
  // in the same library, read from the block's call path (unnamed_function_row below).
  bool unnamed_function = false;
  // The frame makes one `name` of each block (std::make_unique<T>, T no array): a type
  // reported at the block's start is then a member the constructor built in place
  // (kj::Maybe, a union member), not the block's; the block is a T.
  bool one_object = false;

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

// The row of a block that a function without a symbol in a stripped runtime library
// allocated, named by the function of that library that called it (the nearest one on
// the block's path with a symbol, `caller`): what the library's rows say of that
// function ("libstdc++: std::filesystem::path" for a member of path, which allocates
// its components in local functions of libstdc++.so), else "<library>: <caller>"
// without its parameters. `library_row`: the block's "<library>: function without a
// symbol".
std::string unnamed_function_row(const std::string& library_row, const std::string& caller);

// The storage of abseil's and parallel-hashmap's containers. Their Swiss tables
// allocate control bytes and slots in one block, and their btrees each node, as an array
// of an alignment type: `absl::container_internal::AlignedType<8ul>` (abseil's now),
// `phmap::priv::Allocate<8ul, std::allocator<T>>(...)::M` (local to the allocation
// function: parallel-hashmap's, and abseil's before 2025). That is the block's true
// static type, but it names neither the container nor what it holds; the container's
// frame that allocates it does.
bool container_storage(const std::string& type);

// What a frame on such a block's path says, walking out from the allocation:
// kContainer (a member of the raw_hash_set of a container's policy, or of the btree of
// its params; `row` is then "table of absl::flat_hash_map<int, Foo>" or "node of
// absl::btree_set<int>"), kInside (the allocation's own machinery, or the library's
// internals around it: walk on) or kOutside (anything else: not a block this walk can
// name).
enum class StorageFrame { kContainer, kInside, kOutside };
StorageFrame container_frame(const std::string& function, std::string* row);

}  // namespace core
}  // namespace heaptype

#endif
