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
