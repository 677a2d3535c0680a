// heaptype/hint.hpp: the check that spares a typed allocation a second call into
// the runtime.
//
// Once a thread has seen the type of a call site's blocks arrive, operator new
// names the type itself and leaves the block's object address and type here (a
// thread-local pair). The new-expression's report (new.hpp) and the typed
// allocator's (bits/c++allocator.h) compare with it and call the runtime only when
// it differs: the first block of a call site, a constructor that allocated in
// between, placement new. A check that agrees claims the hint (clears it).
#ifndef HEAPTYPE_HINT_HPP
#define HEAPTYPE_HINT_HPP

#include <cstddef>

extern "C" {
struct heaptype_hint_t {
  const void* object;
  const void* type_tag;
};
// Defined by the runtime, which lives in the executable (or is preloaded): its
// thread-local storage is static, so the initial-exec model reaches it from any
// module, dlopen'ed ones included.
extern __thread heaptype_hint_t heaptype_hint __attribute__((tls_model("initial-exec")));

void heaptype_tag_new(const void* p, const void* type_tag, std::size_t elem_size, std::size_t elem_align);
// The block operator new just returned at `p` ends with `count` objects of `type_tag`
// (elem_size bytes each); bytes before them, if any, are a header of the block's own
// (a copy-on-write string's _Rep before its characters).
void heaptype_tag_allocation(const void* p, const void* type_tag, std::size_t elem_size, std::size_t count);
}

namespace heaptype {
namespace detail {

// True when operator new named the block so already; the check then claims the hint:
// a later report for the block (placement new into it: a pool's storage) is not its
// own, while one before the claim may be (tracker.cpp, "A call site's type, contested").
inline bool named_already(const void* p, const void* type_tag) noexcept {
  if (heaptype_hint.object != p || heaptype_hint.type_tag != type_tag) return false;
  heaptype_hint.object = nullptr;
  return true;
}

// A new-expression's result `p` (possibly past an array cookie) holds objects of
// `type_tag`, each elem_size bytes. (GCC 12 takes the address handed over for a read
// of the object, which may not be constructed yet: see new.hpp's operator*.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
inline void report_new(const void* p, const void* type_tag, std::size_t elem_size, std::size_t elem_align) noexcept {
  if (p && !named_already(p, type_tag)) heaptype_tag_new(p, type_tag, elem_size, elem_align);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace detail
}  // namespace heaptype

#endif
