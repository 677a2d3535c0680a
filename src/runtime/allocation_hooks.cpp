// allocation_hooks.cpp: the replaced allocation and deallocation functions.
//
// All of C++'s global forms (plain, array, nothrow, align_val_t, sized) and C's
// malloc family, so no allocation of the program escapes: C allocations count as
// untyped blocks, as in heaptrack's figures. Memory always comes from glibc's own
// allocator through its __libc_* entry points, so an operator new is counted once,
// not again as the malloc inside it; the tracker only observes.
#include <errno.h>

#include <cstdlib>
#include <new>

#include "tracker.hpp"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void* __libc_pvalloc(size_t size);
void __libc_free(void* p);
}

namespace {

namespace rt = heaptype::runtime;

inline size_t at_least_one(size_t size) { return size ? size : 1; }

void* raw_allocate(size_t size, size_t alignment) {
  if (alignment <= alignof(std::max_align_t)) return __libc_malloc(at_least_one(size));
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  return __libc_memalign(alignment, at_least_one(size));
}

// [new.delete.single]: call the new_handler until it succeeds or there is none.
void* allocate_or_throw(size_t size, size_t alignment) {
  for (;;) {
    if (void* p = raw_allocate(size, alignment)) return p;
    std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}

void* allocate_or_null(size_t size, size_t alignment) noexcept {
  try {
    return allocate_or_throw(size, alignment);
  } catch (...) {
    return nullptr;
  }
}

// `frame` is the hook's own frame address: 16 bytes above it is the allocating
// code's stack pointer at the call (the runtime keeps frame pointers).
inline void* tracked(void* p, size_t size, void* call_site, void* frame) {
  if (p) rt::on_alloc(p, size, reinterpret_cast<uintptr_t>(call_site), reinterpret_cast<uintptr_t>(frame) + 16);
  return p;
}

inline void release(void* p) noexcept {
  if (!p) return;
  rt::on_free(p);
  __libc_free(p);
}

inline bool is_power_of_two(size_t n) { return n && !(n & (n - 1)); }

constexpr size_t kDefault = alignof(std::max_align_t);

}  // namespace

// The force-included header refers to this symbol: a program built with it but
// linked without the runtime fails to link, naming the problem. It lives here so
// that a static link always pulls in the hooks, even into a program that never
// names malloc or operator new itself (its allocations happen inside libc or
// libstdc++).
extern "C" {
__attribute__((visibility("default"))) extern const char
    heaptype_link_error__program_compiled_with_heaptype_new_hpp_must_link_libheaptype = 1;
}

#define HEAPTYPE_CALLER __builtin_return_address(0), __builtin_frame_address(0)
#define HEAPTYPE_EXPORT __attribute__((visibility("default"), noinline))

HEAPTYPE_EXPORT void* operator new(size_t size) {
  return tracked(allocate_or_throw(size, kDefault), size, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new[](size_t size) {
  return tracked(allocate_or_throw(size, kDefault), size, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new(size_t size, const std::nothrow_t&) noexcept {
  return tracked(allocate_or_null(size, kDefault), size, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  return tracked(allocate_or_null(size, kDefault), size, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new(size_t size, std::align_val_t align) {
  return tracked(allocate_or_throw(size, static_cast<size_t>(align)), size, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new[](size_t size, std::align_val_t align) {
  return tracked(allocate_or_throw(size, static_cast<size_t>(align)), size, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new(size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return tracked(allocate_or_null(size, static_cast<size_t>(align)), size, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new[](size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return tracked(allocate_or_null(size, static_cast<size_t>(align)), size, HEAPTYPE_CALLER);
}

HEAPTYPE_EXPORT void operator delete(void* p) noexcept { release(p); }
HEAPTYPE_EXPORT void operator delete[](void* p) noexcept { release(p); }
HEAPTYPE_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
HEAPTYPE_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
HEAPTYPE_EXPORT void operator delete(void* p, size_t) noexcept { release(p); }
HEAPTYPE_EXPORT void operator delete[](void* p, size_t) noexcept { release(p); }
HEAPTYPE_EXPORT void operator delete(void* p, std::align_val_t) noexcept { release(p); }
HEAPTYPE_EXPORT void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
HEAPTYPE_EXPORT void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
HEAPTYPE_EXPORT void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
HEAPTYPE_EXPORT void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
HEAPTYPE_EXPORT void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }

// --- the C allocation functions ------------------------------------------------------

extern "C" {

HEAPTYPE_EXPORT void* malloc(size_t size) { return tracked(__libc_malloc(size), size, HEAPTYPE_CALLER); }

HEAPTYPE_EXPORT void free(void* p) { release(p); }

HEAPTYPE_EXPORT void* calloc(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) bytes = 0;  // glibc fails the call itself
  return tracked(__libc_calloc(count, size), bytes, HEAPTYPE_CALLER);
}

HEAPTYPE_EXPORT void* realloc(void* old, size_t size) {
  if (!old) return tracked(__libc_malloc(size), size, HEAPTYPE_CALLER);
  // Detach first: once glibc has released `old`, another thread may be handed the
  // same address, and its allocation must not be mistaken for this one.
  uint64_t old_owner = rt::detach_block(old);
  void* p = __libc_realloc(old, size);
  rt::on_realloc_done(old_owner, old, p, size, reinterpret_cast<uintptr_t>(__builtin_return_address(0)),
                      reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) + 16);
  return p;
}

HEAPTYPE_EXPORT void* reallocarray(void* old, size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(old, bytes);
}

HEAPTYPE_EXPORT void* memalign(size_t alignment, size_t size) {
  return tracked(__libc_memalign(alignment, size), size, HEAPTYPE_CALLER);
}

HEAPTYPE_EXPORT void* aligned_alloc(size_t alignment, size_t size) {
  return tracked(__libc_memalign(alignment, size), size, HEAPTYPE_CALLER);
}

HEAPTYPE_EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  if (!is_power_of_two(alignment) || alignment % sizeof(void*) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, size);
  if (!p) return ENOMEM;
  *out = tracked(p, size, HEAPTYPE_CALLER);
  return 0;
}

HEAPTYPE_EXPORT void* valloc(size_t size) { return tracked(__libc_valloc(size), size, HEAPTYPE_CALLER); }

HEAPTYPE_EXPORT void* pvalloc(size_t size) { return tracked(__libc_pvalloc(size), size, HEAPTYPE_CALLER); }

}  // extern "C"
