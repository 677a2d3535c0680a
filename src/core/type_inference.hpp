// type_inference.hpp: a type for an untyped allocation, read from the functions
// at its call site. Code built without HeapType's header (libstdc++.so's
// out-of-line templates, a library nobody rebuilt) allocates untyped, but when the
// allocating frame is a standard allocator or factory its name says the type:
// std::__new_allocator<T>::allocate, std::make_shared<T>, any member of
// std::basic_string<C> (its buffer is C[]). Such a type is marked inferred.
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

  // How many T `count` blocks of `bytes` in all hold: bytes / sizeof(T) when that
  // divides, else one per block.
  uint64_t objects(uint64_t count, uint64_t bytes) const;
};

// The innermost standard allocator or factory frame at the call site decides.
InferredType infer_type(const CodeInfo& call_site);

// For one function name: the type it allocates, and whether that is the frame's
// own first template argument (its DWARF size is then sizeof(T)).
bool type_from_function(const std::string& function, std::string* type, bool* own_argument);

}  // namespace core
}  // namespace heaptype

#endif
