// heaptype/new.hpp: force-include this (`-include heaptype/new.hpp`) to type every
// new-expression of a translation unit.
//
// Two capture modes (docs/capture.md). With HEAPTYPE_TYPE_AWARE=1 (Clang 21 and
// later, C++20 and later; earlier standards take the macro) it declares Clang's type-aware operator new and delete templates
// (type_aware_new.hpp) and defines no macro. Otherwise, the macro mode below:
//
// `new T(...)` becomes `heaptype_new_trick{} * new T(...)` (the struct's real name is
// longer, see below); the operator* below
// receives the T* the expression produced and reports heaptype::type_id<T> for it.
// The trick struct lives in the global namespace, so argument-dependent lookup
// finds the operator from any namespace, and `::new (p) T` becomes
// `::heaptype_new_trick{} * new (p) T`, which still parses. Placement new reports
// too: the runtime names only a block it tracks and has not named yet, where the
// object starts (within the block's first bytes), so an object constructed at the
// start of a fresh malloc() block (an allocator's `construct`, a header placed
// before a buffer) names that block.
//
// Other unary operators applied directly to a new-expression do not survive the
// macro: `delete new T` (which does nothing useful) and C-style casts such as
// `(Base*)new Derived` fail to compile; write static_cast<Base*>(new Derived).
//
// The standard headers are included first: they spell `::operator new` and
// placement new, which must not see the macro. Headers of other libraries that do
// the same belong between heaptype/undef_new.h and heaptype/define_new.h.
#ifndef HEAPTYPE_NEW_HPP
#define HEAPTYPE_NEW_HPP

#ifdef __cplusplus

// The type-aware mode needs std::type_identity (C++20). A translation unit of an
// earlier standard takes the macro mode instead, so that one set of flags
// (`heaptype --cflags`, which says so) builds every file of a project; the runtime
// takes both kinds of report in one program.
#if defined(HEAPTYPE_TYPE_AWARE) && HEAPTYPE_TYPE_AWARE && __cplusplus <= 201703L
#undef HEAPTYPE_TYPE_AWARE
#define HEAPTYPE_TYPE_AWARE 0
#endif

#if defined(HEAPTYPE_TYPE_AWARE) && HEAPTYPE_TYPE_AWARE
#include "type_aware_new.hpp"
#else
#include "detail/std_headers.hpp"
#include "heaptype.hpp"

// The macro's struct. Its name is the fix for the one thing the macro breaks: a
// translation unit that declares its own `operator new` (a class's, or a global one)
// after the macro reads `operator <this struct>{} * new(...)`, and the compilers'
// first error names it: "declaration of 'operator heaptype_new_macro__to_declare_an_
// operator_new_include_heaptype_undef_new_h' as non-function".
struct heaptype_new_macro__to_declare_an_operator_new_include_heaptype_undef_new_h {};
using heaptype_new_trick = heaptype_new_macro__to_declare_an_operator_new_include_heaptype_undef_new_h;
struct heaptype_deref_new_trick {};

// C++20 allows new-expressions in constant expressions (`constexpr int f() { int* p =
// new int(42); ... delete p; }`): there the operators must be constexpr, and report
// nothing (no block is made at run time).
#if defined(__cpp_constexpr_dynamic_alloc)
#define HEAPTYPE_CONSTEXPR_NEW constexpr
#define HEAPTYPE_AT_RUN_TIME !__builtin_is_constant_evaluated()
#else
#define HEAPTYPE_CONSTEXPR_NEW inline
#define HEAPTYPE_AT_RUN_TIME true
#endif

// The report passes the object's address and reads nothing of it; GCC 12 at -O2 takes
// a pointer handed to a function as a read, and warns of a placement new into an object
// not constructed yet (kj::Maybe's): not the program's warning, not in its build.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <class T>
HEAPTYPE_CONSTEXPR_NEW T* operator*(heaptype_new_trick, T* p) noexcept {
  if (HEAPTYPE_AT_RUN_TIME) ::heaptype::detail::report_new(p, ::heaptype::tag_of<T>(), sizeof(T), alignof(T));
  return p;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// `*new T` (as in `static Foo& f = *new Foo;`) becomes `*heaptype_new_trick{} * new T`,
// which C++ reads as `(*heaptype_new_trick{}) * new T`: the unary * hands over to a
// second trick whose binary * dereferences.
HEAPTYPE_CONSTEXPR_NEW heaptype_deref_new_trick operator*(heaptype_new_trick) noexcept { return {}; }

// GCC's -Weffc++ wants a binary operator* to return by value; this one must return
// the object itself, and the warning would fire in every translation unit.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Weffc++"
#endif
template <class T>
HEAPTYPE_CONSTEXPR_NEW T& operator*(heaptype_deref_new_trick, T* p) noexcept {
  if (HEAPTYPE_AT_RUN_TIME) ::heaptype::detail::report_new(p, ::heaptype::tag_of<T>(), sizeof(T), alignof(T));
  return *p;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // HEAPTYPE_TYPE_AWARE

// Referenced from every translation unit: linking without libheaptype fails with
// this name in the error.
extern "C" const char
    heaptype_link_error__program_compiled_with_heaptype_new_hpp_must_link_libheaptype;
namespace heaptype {
namespace detail {
__attribute__((used)) static const char* const link_check =
    &heaptype_link_error__program_compiled_with_heaptype_new_hpp_must_link_libheaptype;
}  // namespace detail
}  // namespace heaptype

// Built without calling contexts (`heaptype --cflags --callstack none`): the
// runtime records none unless HEAPTYPE_CALLSTACK says otherwise. A weak definition
// in every translation unit of the build, merged by the linker.
#ifdef HEAPTYPE_NO_CALLSTACK
extern "C" {
__attribute__((weak)) char heaptype_built_without_callstack = 1;
}
#endif

#if !(defined(HEAPTYPE_TYPE_AWARE) && HEAPTYPE_TYPE_AWARE)
// Headers that spell `operator new` by name, read before the macro: cmake/heaptype-
// compile.sh names them (-DHEAPTYPE_FIRST_INCLUDE_1="path"...) when a compile fails on
// the macro. Their include guards keep their later inclusions empty.
#ifdef HEAPTYPE_FIRST_INCLUDE_1
#include HEAPTYPE_FIRST_INCLUDE_1
#endif
#ifdef HEAPTYPE_FIRST_INCLUDE_2
#include HEAPTYPE_FIRST_INCLUDE_2
#endif
#ifdef HEAPTYPE_FIRST_INCLUDE_3
#include HEAPTYPE_FIRST_INCLUDE_3
#endif
#ifdef HEAPTYPE_FIRST_INCLUDE_4
#include HEAPTYPE_FIRST_INCLUDE_4
#endif
#include "define_new.h"
#endif

#endif  // __cplusplus
#endif
