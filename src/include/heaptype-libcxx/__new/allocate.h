// __new/allocate.h, HeapType's version for libc++: std::allocator reports what it
// allocates (the libstdc++ counterpart is heaptype-stl/bits/c++allocator.h).
//
// libc++'s std::allocator<T>::allocate(n) calls std::__libcpp_allocate<T>(n), defined
// here; this copy of libc++ 21-22's header hands the type and the count to the
// runtime in the same call (heaptype_typed_new, as a type-aware new does): vector
// buffers count as T[n], map nodes as the node type. The block is an operator new
// block: deallocate()'s operator delete matches it. `heaptype --cflags` puts this
// directory ahead of libc++'s with -I (libc++'s own directory comes first among the
// -isystem ones). Other libc++ versions get their own header, untouched.
#if defined(_LIBCPP_VERSION) && _LIBCPP_VERSION >= 210000 && _LIBCPP_VERSION < 230000 && \
    !defined(HEAPTYPE_NO_LIBCXX_SHIM)

#ifndef _LIBCPP___NEW_ALLOCATE_H
#define _LIBCPP___NEW_ALLOCATE_H

#include <__config>
#include <__cstddef/max_align_t.h>
#include <__cstddef/size_t.h>
#include <__new/align_val_t.h>
#include <__type_traits/type_identity.h>
#include <__utility/element_count.h>

#include <heaptype/type_id.hpp>

#if !defined(_LIBCPP_HAS_NO_PRAGMA_SYSTEM_HEADER)
#  pragma GCC system_header
#endif

extern "C" void* heaptype_typed_new(decltype(sizeof(0)) size, decltype(sizeof(0)) alignment, const void* type_tag,
                                    decltype(sizeof(0)) elem_size, unsigned kind);

_LIBCPP_BEGIN_NAMESPACE_STD

_LIBCPP_CONSTEXPR inline _LIBCPP_HIDE_FROM_ABI bool __is_overaligned_for_new(size_t __align) _NOEXCEPT {
#ifdef __STDCPP_DEFAULT_NEW_ALIGNMENT__
  return __align > __STDCPP_DEFAULT_NEW_ALIGNMENT__;
#else
  return __align > _LIBCPP_ALIGNOF(max_align_t);
#endif
}

// kind 3: an allocator's block of n objects, released with operator delete.
template <class _Tp>
inline _LIBCPP_HIDE_FROM_ABI _LIBCPP_NO_CFI _Tp*
__libcpp_allocate(__element_count __n, [[__maybe_unused__]] size_t __align = _LIBCPP_ALIGNOF(_Tp)) {
  size_t __size = static_cast<size_t>(__n) * sizeof(_Tp);
  size_t __alignment = _LIBCPP_ALIGNOF(max_align_t);
#if _LIBCPP_HAS_ALIGNED_ALLOCATION
  if (__is_overaligned_for_new(__align))
    __alignment = __align;
#endif
  return static_cast<_Tp*>(::heaptype_typed_new(__size, __alignment, ::heaptype::tag_of<_Tp>(), sizeof(_Tp), 3));
}

#if defined(__cpp_sized_deallocation) && __cpp_sized_deallocation >= 201309L
#  define _LIBCPP_ONLY_IF_SIZED_DEALLOCATION(...) __VA_ARGS__
#else
#  define _LIBCPP_ONLY_IF_SIZED_DEALLOCATION(...) /* nothing */
#endif

template <class _Tp>
inline _LIBCPP_HIDE_FROM_ABI void
__libcpp_deallocate(__type_identity_t<_Tp>* __ptr,
                    __element_count __n,
                    [[__maybe_unused__]] size_t __align = _LIBCPP_ALIGNOF(_Tp)) _NOEXCEPT {
  [[__maybe_unused__]] size_t __size = static_cast<size_t>(__n) * sizeof(_Tp);
#if _LIBCPP_HAS_ALIGNED_ALLOCATION
  if (__is_overaligned_for_new(__align))
    return __builtin_operator_delete(
        __ptr _LIBCPP_ONLY_IF_SIZED_DEALLOCATION(, __size), static_cast<align_val_t>(__align));
#endif
  return __builtin_operator_delete(__ptr _LIBCPP_ONLY_IF_SIZED_DEALLOCATION(, __size));
}

#undef _LIBCPP_ONLY_IF_SIZED_DEALLOCATION

template <class _Tp>
inline _LIBCPP_HIDE_FROM_ABI void __libcpp_deallocate_unsized(
    __type_identity_t<_Tp>* __ptr, [[__maybe_unused__]] size_t __align = _LIBCPP_ALIGNOF(_Tp)) _NOEXCEPT {
#if _LIBCPP_HAS_ALIGNED_ALLOCATION
  if (__is_overaligned_for_new(__align))
    return __builtin_operator_delete(__ptr, static_cast<align_val_t>(__align));
#endif
  return __builtin_operator_delete(__ptr);
}
_LIBCPP_END_NAMESPACE_STD

#endif  // _LIBCPP___NEW_ALLOCATE_H

#else
#include_next <__new/allocate.h>
#endif
