// ext/alloc_traits.h, HeapType's version: a std::basic_string's characters count as
// `C[] of std::basic_string<C>` (heaptype::elements_of), not as `C`, the row of
// `new C[n]` and std::vector<C>.
//
// libstdc++'s basic_string allocates through __gnu_cxx::__alloc_traits<allocator<C>>
// ::allocate(a, n) with an lvalue of exactly std::allocator<C> (its _M_get_allocator(),
// or a copy of it); vector<C> and deque<C> pass their _M_impl, a class derived from
// the allocator. The specializations below tell the two apart by overload: the
// derived-class template is the better match for the containers, the plain
// allocator<C>& for strings. Everything else is the primary template's (inherited).
#include_next <ext/alloc_traits.h>

#if __cplusplus >= 201103L && !defined(HEAPTYPE_EXT_ALLOC_TRAITS_H) && defined(__GLIBCXX__)
#define HEAPTYPE_EXT_ALLOC_TRAITS_H 1

#include <bits/stringfwd.h>
#include <type_traits>

#include <heaptype/hint.hpp>
#include <heaptype/type_id.hpp>

namespace __gnu_cxx _GLIBCXX_VISIBILITY(default) {
_GLIBCXX_BEGIN_NAMESPACE_VERSION

template <typename _CharT>
struct __heaptype_string_alloc_traits : __alloc_traits<std::allocator<_CharT>, void> {
  typedef __alloc_traits<std::allocator<_CharT>, void> _Base;
  typedef typename _Base::pointer pointer;
  typedef typename _Base::size_type size_type;
  using _Base::allocate;

  // basic_string's buffer.
  _GLIBCXX_NODISCARD static _GLIBCXX20_CONSTEXPR pointer allocate(std::allocator<_CharT>& __a, size_type __n) {
#if __cplusplus > 201703L
    if (__builtin_is_constant_evaluated()) return _Base::allocate(__a, __n);
#endif
    return __a.__heaptype_allocate_as(__n, ::heaptype::tag_of<::heaptype::elements_of<_CharT, std::basic_string<_CharT> > >());
  }

  // A container's implementation object, derived from the allocator.
  template <typename _Derived, typename = typename std::enable_if<
                                   std::is_base_of<std::allocator<_CharT>, _Derived>::value &&
                                   !std::is_same<std::allocator<_CharT>, _Derived>::value>::type>
  _GLIBCXX_NODISCARD static _GLIBCXX20_CONSTEXPR pointer allocate(_Derived& __a, size_type __n) {
    return _Base::allocate(__a, __n);
  }
};

template <>
struct __alloc_traits<std::allocator<char>, char> : __heaptype_string_alloc_traits<char> {};
template <>
struct __alloc_traits<std::allocator<wchar_t>, wchar_t> : __heaptype_string_alloc_traits<wchar_t> {};
template <>
struct __alloc_traits<std::allocator<char16_t>, char16_t> : __heaptype_string_alloc_traits<char16_t> {};
template <>
struct __alloc_traits<std::allocator<char32_t>, char32_t> : __heaptype_string_alloc_traits<char32_t> {};
#ifdef _GLIBCXX_USE_CHAR8_T
template <>
struct __alloc_traits<std::allocator<char8_t>, char8_t> : __heaptype_string_alloc_traits<char8_t> {};
#endif

_GLIBCXX_END_NAMESPACE_VERSION
}  // namespace __gnu_cxx

#endif
