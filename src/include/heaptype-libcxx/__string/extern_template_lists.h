// __string/extern_template_lists.h, HeapType's version for libc++ 21-22: no
// basic_string member is declared `extern template`.
//
// libc++ lists the basic_string<char> and <wchar_t> members its library instantiates
// (string.cpp) and declares them `extern template` in <string>: the program calls the
// library's copies, compiled without HeapType's allocator, and their buffers are
// untyped. With the lists empty the program instantiates the members it uses, typed;
// the linker keeps the program's copy (COMDAT, the program's objects come first).
// A system header (this directory comes with -I): #include_next and libc++'s own
// spellings raise no warning in the program's build (-pedantic-errors included).
#pragma GCC system_header

#include_next <__string/extern_template_lists.h>

#if defined(_LIBCPP_VERSION) && _LIBCPP_VERSION >= 210000 && _LIBCPP_VERSION < 230000 && \
    !defined(HEAPTYPE_NO_LIBCXX_SHIM)
#undef _LIBCPP_STRING_V1_EXTERN_TEMPLATE_LIST
#define _LIBCPP_STRING_V1_EXTERN_TEMPLATE_LIST(Func, CharT)
#undef _LIBCPP_STRING_UNSTABLE_EXTERN_TEMPLATE_LIST
#define _LIBCPP_STRING_UNSTABLE_EXTERN_TEMPLATE_LIST(Func, CharT)
#endif
