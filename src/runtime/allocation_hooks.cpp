// allocation_hooks.cpp: the replaced global allocation and deallocation functions.
//
// All of them: plain, array, nothrow, align_val_t and sized forms, so no allocation
// of the program escapes and every block is freed through the function that
// matches how it was obtained. Memory comes from malloc / posix_memalign; the
// tracker only observes.
#include <cstdlib>
#include <new>

#include "tracker.hpp"

namespace {

namespace rt = heaptype::runtime;

inline size_t at_least_one(size_t size) { return size ? size : 1; }

void* raw_allocate(size_t size, size_t alignment) {
  if (alignment <= alignof(std::max_align_t)) return std::malloc(at_least_one(size));
  void* p = nullptr;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  return posix_memalign(&p, alignment, at_least_one(size)) == 0 ? p : nullptr;
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

inline void* tracked(void* p, size_t size, void* call_site) {
  if (p) rt::on_alloc(p, size, reinterpret_cast<uintptr_t>(call_site));
  return p;
}

inline void release(void* p) noexcept {
  if (!p) return;
  rt::on_free(p);
  std::free(p);
}

constexpr size_t kDefault = alignof(std::max_align_t);

}  // namespace

#define HEAPTYPE_CALLER __builtin_return_address(0)
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
