/* heaptype/define_new.h: (re)defines `new` so that new-expressions report their type.
 * No include guard on purpose: include it again after heaptype/undef_new.h to end a
 * fenced region (code that declares its own operator new, third-party headers). */
#if defined(__cplusplus) && !(defined(HEAPTYPE_TYPE_AWARE) && HEAPTYPE_TYPE_AWARE) && \
    !defined(HEAPTYPE_NO_NEW_MACRO)
/* The type-aware mode (HEAPTYPE_TYPE_AWARE=1) has no macro: fences are no-ops there; nor
 * does a translation unit compiled with HEAPTYPE_NO_NEW_MACRO (cmake/heaptype-compile.sh:
 * one that spells `operator new` by name). */
#undef new
/* Clang's -Wkeyword-macro (in -pedantic builds) objects to any macro named like a
 * keyword; this one is the point of the header. */
#ifdef __clang__
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wkeyword-macro"
#endif
#define new heaptype_new_macro__to_declare_an_operator_new_include_heaptype_undef_new_h{} * new
#ifdef __clang__
#pragma clang diagnostic pop
#endif
#endif
