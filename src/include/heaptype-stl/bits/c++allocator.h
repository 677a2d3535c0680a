// bits/c++allocator.h, HeapType's version: std::allocator reports what it allocates.
//
// libstdc++ derives std::allocator<T> from std::__allocator_base<T>, defined in this
// header. An include directory holding this file, placed ahead of the system ones
// (heaptype --cflags does that), makes that base a __new_allocator<T> whose
// allocate() reports T and the element count to HeapType: vector buffers count as
// T[n], map nodes as the node type, make_shared<T> as its control block type.
// Opt out by leaving the directory off the include path.
#ifndef _GLIBCXX_CXX_ALLOCATOR_H
#define _GLIBCXX_CXX_ALLOCATOR_H 1

#if __has_include(<bits/new_allocator.h>)
#include <bits/new_allocator.h>
#define HEAPTYPE_STD_NEW_ALLOCATOR std::__new_allocator
#else
#include <ext/new_allocator.h>
#define HEAPTYPE_STD_NEW_ALLOCATOR __gnu_cxx::new_allocator
#endif

// libstdc++ declares its explicit instantiations (basic_string before C++20, the
// streams, locale facets) `extern template`: their members then run from
// libstdc++.so, compiled without this allocator, and allocate untyped. Without the
// declarations (_GLIBCXX_EXTERN_TEMPLATE 0, as libstdc++ supports) the program
// instantiates what it uses, through this allocator; measured on g++ 12: every string
// and stringstream buffer typed at -std=c++17, the binary ~35% larger. Executables
// that export their instantiations (-rdynamic) do not make libstdc++.so's own copies
// use them: the library inlines its string code. HEAPTYPE_KEEP_EXTERN_TEMPLATES keeps
// the declarations.
#if !defined(HEAPTYPE_KEEP_EXTERN_TEMPLATES)
#undef _GLIBCXX_EXTERN_TEMPLATE
#define _GLIBCXX_EXTERN_TEMPLATE 0
#endif

#include <bits/atomic_word.h>
#include <bits/stringfwd.h>
#include <heaptype/hint.hpp>
#include <heaptype/type_id.hpp>

namespace std _GLIBCXX_VISIBILITY(default) {
_GLIBCXX_BEGIN_NAMESPACE_VERSION

template <typename _Tp>
class __heaptype_allocator_base : public HEAPTYPE_STD_NEW_ALLOCATOR<_Tp> {
  typedef HEAPTYPE_STD_NEW_ALLOCATOR<_Tp> _Base;

 public:
  template <typename _Up>
  struct rebind {
    typedef __heaptype_allocator_base<_Up> other;
  };

  _GLIBCXX20_CONSTEXPR __heaptype_allocator_base() _GLIBCXX_NOTHROW {}
  _GLIBCXX20_CONSTEXPR __heaptype_allocator_base(const __heaptype_allocator_base& __a) _GLIBCXX_NOTHROW
      : _Base(__a) {}
  template <typename _Up>
  _GLIBCXX20_CONSTEXPR __heaptype_allocator_base(const __heaptype_allocator_base<_Up>&) _GLIBCXX_NOTHROW {}
#if __cplusplus >= 201103L
  __heaptype_allocator_base& operator=(const __heaptype_allocator_base&) = default;
#endif

  _GLIBCXX_NODISCARD _Tp* allocate(size_t __n, const void* __hint = 0) {
    return __heaptype_allocate_as(__n, ::heaptype::tag_of<_Tp>());
  }

  // n objects of T in a block counted as `__type`: T itself, or the owner's view of
  // them (a string's characters: heaptype-stl/ext/alloc_traits.h).
  _Tp* __heaptype_allocate_as(size_t __n, const void* __type) {
    _Tp* __p = _Base::allocate(__n, 0);
    // Exactly the block operator new just returned: it holds T[n].
    if (!::heaptype::detail::named_already(__p, __type)) heaptype_tag_allocation(__p, __type, sizeof(_Tp), __n);
    return __p;
  }
};

#if __cplusplus >= 201103L
template <typename _Tp>
using __allocator_base = __heaptype_allocator_base<_Tp>;
#else
#define __allocator_base __heaptype_allocator_base
#endif

#if !_GLIBCXX_USE_CXX11_ABI
// The copy-on-write string (bits/cow_string.h: the old ABI) allocates its _Rep (length,
// capacity, reference count) and its characters in one block through
// `_Raw_bytes_alloc(__alloc)`, a std::allocator<char> made from the string's
// allocator<C>, which would count the block as `char`. The macro below (the name is
// libstdc++'s, used in cow_string.h alone, always inside basic_string<_CharT>::_Rep)
// makes that this allocator instead, for strings of std::allocator: the block counts as the characters'
// (`C[] of std::basic_string<C>`, as the new ABI's buffer), the _Rep as its header.
template <typename _CharT>
struct __heaptype_cow_string_bytes : __heaptype_allocator_base<char> {
  struct __rep_base {  // basic_string<_CharT>::_Rep_base's layout (a private type)
    size_t __length, __capacity;
    _Atomic_word __refcount;
  };

  template <typename _Alloc>
  explicit __heaptype_cow_string_bytes(const _Alloc&) _GLIBCXX_USE_NOEXCEPT {}

  char* allocate(size_t __n) {
    char* __p = HEAPTYPE_STD_NEW_ALLOCATOR<char>::allocate(__n, 0);
    const void* __type = ::heaptype::tag_of< ::heaptype::elements_of<_CharT, basic_string<_CharT> > >();
    if (__n > sizeof(__rep_base) && !::heaptype::detail::named_already(__p + sizeof(__rep_base), __type))
      heaptype_tag_allocation(__p, __type, sizeof(_CharT), (__n - sizeof(__rep_base)) / sizeof(_CharT));
    return __p;
  }
};
// Strings of std::allocator only: another allocator keeps its own rebound copy (the
// typedef of the same name, which the macro does not expand).
template <typename _CharT, typename _Alloc, typename _Raw>
struct __heaptype_raw_bytes {
  typedef _Raw __type;
};
template <typename _CharT, typename _Raw>
struct __heaptype_raw_bytes<_CharT, allocator<_CharT>, _Raw> {
  typedef __heaptype_cow_string_bytes<_CharT> __type;
};
#define _Raw_bytes_alloc(__a) typename ::std::__heaptype_raw_bytes<_CharT, _Alloc, _Raw_bytes_alloc>::__type(__a)
#endif

_GLIBCXX_END_NAMESPACE_VERSION
}  // namespace std

#undef HEAPTYPE_STD_NEW_ALLOCATOR

#ifndef _GLIBCXX_SANITIZE_STD_ALLOCATOR
#if defined(__SANITIZE_ADDRESS__)
#define _GLIBCXX_SANITIZE_STD_ALLOCATOR 1
#elif defined __has_feature
#if __has_feature(address_sanitizer)
#define _GLIBCXX_SANITIZE_STD_ALLOCATOR 1
#endif
#endif
#endif

#endif
