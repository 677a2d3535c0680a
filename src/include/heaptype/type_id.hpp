// heaptype/type_id.hpp: one byte per C++ type, the identity HeapType records.
//
// The address of `heaptype::type_id<T>::tag` is the type tag. Every template static
// lands in its own COMDAT section and keeps its mangled name in the symbol table
// (and in a linker map file), so the profile needs no RTTI: the analysis reads the
// name `heaptype::type_id<T>::tag` back from the binary and recovers `T`.
#ifndef HEAPTYPE_TYPE_ID_HPP
#define HEAPTYPE_TYPE_ID_HPP

#include <cstddef>

namespace heaptype {

template <class T>
struct type_id {
  static char tag;  // never read: only its address matters
};

template <class T>
char type_id<T>::tag = 0;

// The paper's pseudo types: the same C++ type counted under a label of its own,
// e.g. `New_<int, MEM_TYPE_IMGBUF>(n)` reports as `int [MEM_TYPE_IMGBUF]`.
// A label is any type name; an incomplete struct is enough.
template <class T, class Label>
struct labeled;

// Elements a standard class allocates for itself, counted under their owner: a
// std::string's characters are `elements_of<char, std::string>`, reported as
// `char[] of std::string` (not `char`, the row of `new char[n]` and vector<char>).
template <class Element, class Owner>
struct elements_of;

// cv-qualifiers do not make a different heap type.
template <class T> struct strip_cv { typedef T type; };
template <class T> struct strip_cv<const T> { typedef T type; };
template <class T> struct strip_cv<volatile T> { typedef T type; };
template <class T> struct strip_cv<const volatile T> { typedef T type; };

template <class T>
inline const void* tag_of() noexcept {
  return &type_id<typename strip_cv<T>::type>::tag;
}

}  // namespace heaptype

#endif
