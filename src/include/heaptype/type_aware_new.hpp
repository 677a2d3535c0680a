// heaptype/type_aware_new.hpp: the type-aware capture mode (Clang 21 and later).
//
// new.hpp includes this instead of defining the `new` macro when the build defines
// HEAPTYPE_TYPE_AWARE=1 (`heaptype --cflags` does so for Clang >= 21). Clang's
// type-aware allocation functions (P2719, a Clang extension before C++26) receive the
// static type of every new- and delete-expression as std::type_identity<T>:
//
//   new T, new T[n]          one call into the runtime with the type, the size and
//                            whether an array cookie leads the block
//   delete p, delete[] p     the static type of *p and the bytes it says: a block
//                            deleted as a type of another size (a Derived deleted
//                            through a Base* without a virtual destructor) is a
//                            finding, and the block is freed all the same
//
// No macro, so nothing in the program's own code changes meaning: a class with its
// own operator new keeps it (the language prefers it), `::operator new(n)` spelled
// after this header compiles, placement new is left alone.
#ifndef HEAPTYPE_TYPE_AWARE_NEW_HPP
#define HEAPTYPE_TYPE_AWARE_NEW_HPP

#if !defined(__clang__) || !defined(__has_extension)
#error "heaptype: HEAPTYPE_TYPE_AWARE=1 needs Clang 21 or later; use the macro mode (heaptype --cflags --capture macro)"
#elif !__has_extension(cxx_type_aware_allocators)
#error "heaptype: this Clang has no type-aware allocation (Clang 21 or later has); use the macro mode (heaptype --cflags --capture macro)"
#endif

#include <cstddef>
#include <new>
#include <type_traits>

#include "hint.hpp"
#include "type_id.hpp"

#if !defined(__cpp_lib_type_identity)
#error "heaptype: the type-aware mode needs std::type_identity (-std=c++20 or later); use the macro mode (heaptype --cflags --capture macro)"
#endif

extern "C" {
// `kind`: 0 one object, 1 an array without a cookie, 2 an array with one; plus 4 for
// new (std::nothrow): null instead of std::bad_alloc.
void* heaptype_typed_new(std::size_t size, std::size_t alignment, const void* type_tag, std::size_t elem_size,
                         unsigned kind);
void heaptype_typed_delete(void* p, const void* type_tag, std::size_t size, unsigned kind) noexcept;
}

namespace heaptype {
namespace detail {
// After the runtime call: no tail call, so the function holding the new- or
// delete-expression stays on the call path the runtime walks (as with the macro,
// whose report follows operator new).
[[gnu::always_inline]] inline void* keep_frame(void* p) noexcept {
  __asm__ volatile("" : "+r"(p));
  return p;
}
[[gnu::always_inline]] inline void keep_frame() noexcept { __asm__ volatile(""); }

// Itanium C++ ABI: new T[n] puts a cookie holding n before the objects when T is not
// trivially destructible.
template <class T>
constexpr unsigned array_kind = std::is_trivially_destructible<T>::value ? 1u : 2u;
}  // namespace detail
}  // namespace heaptype

#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wext-cxx-type-aware-allocators"
#pragma clang diagnostic ignored "-Wunknown-warning-option"

template <class T>
[[gnu::always_inline]] inline void* operator new(std::type_identity<T>, std::size_t size, std::align_val_t align) {
  return ::heaptype::detail::keep_frame(heaptype_typed_new(size, static_cast<std::size_t>(align), ::heaptype::tag_of<T>(), sizeof(T), 0));
}

template <class T>
[[gnu::always_inline]] inline void* operator new[](std::type_identity<T>, std::size_t size, std::align_val_t align) {
  return ::heaptype::detail::keep_frame(heaptype_typed_new(size, static_cast<std::size_t>(align), ::heaptype::tag_of<T>(), sizeof(T),
                            ::heaptype::detail::array_kind<T>));
}

template <class T>
[[gnu::always_inline]] inline void operator delete(std::type_identity<T>, void* p, std::size_t size,
                                                   std::align_val_t) noexcept {
  heaptype_typed_delete(p, ::heaptype::tag_of<T>(), size, 0);
  ::heaptype::detail::keep_frame();
}

template <class T>
[[gnu::always_inline]] inline void operator delete[](std::type_identity<T>, void* p, std::size_t size,
                                                     std::align_val_t) noexcept {
  heaptype_typed_delete(p, ::heaptype::tag_of<T>(), size, ::heaptype::detail::array_kind<T>);
  ::heaptype::detail::keep_frame();
}

template <class T>
[[gnu::always_inline]] inline void* operator new(std::type_identity<T>, std::size_t size, std::align_val_t align,
                                                const std::nothrow_t&) noexcept {
  return ::heaptype::detail::keep_frame(heaptype_typed_new(size, static_cast<std::size_t>(align), ::heaptype::tag_of<T>(), sizeof(T), 4));
}

template <class T>
[[gnu::always_inline]] inline void* operator new[](std::type_identity<T>, std::size_t size, std::align_val_t align,
                                                  const std::nothrow_t&) noexcept {
  return ::heaptype::detail::keep_frame(heaptype_typed_new(size, static_cast<std::size_t>(align), ::heaptype::tag_of<T>(), sizeof(T),
                            ::heaptype::detail::array_kind<T> | 4));
}

// What a nothrow new calls when the constructor throws.
template <class T>
[[gnu::always_inline]] inline void operator delete(std::type_identity<T>, void* p, std::size_t size, std::align_val_t,
                                                   const std::nothrow_t&) noexcept {
  heaptype_typed_delete(p, ::heaptype::tag_of<T>(), size, 0);
  ::heaptype::detail::keep_frame();
}

template <class T>
[[gnu::always_inline]] inline void operator delete[](std::type_identity<T>, void* p, std::size_t size,
                                                     std::align_val_t, const std::nothrow_t&) noexcept {
  heaptype_typed_delete(p, ::heaptype::tag_of<T>(), size, ::heaptype::detail::array_kind<T>);
  ::heaptype::detail::keep_frame();
}

#pragma clang diagnostic pop

// The API (heaptype::New_ and the rest) after the templates it instantiates.
#include "heaptype.hpp"

#endif
