// allocation_hooks.cpp: the replaced allocation and deallocation functions.
//
// All of C++'s global forms (plain, array, nothrow, align_val_t, sized) and C's
// malloc family, so no allocation of the program escapes: C allocations count as
// untyped blocks, as in heaptrack's figures. Memory always comes from glibc's own
// allocator through its __libc_* entry points, so an operator new is counted once,
// not again as the malloc inside it.
//
// While the runtime is active every block carries a header (block_header.hpp):
// glibc is asked for 16 bytes more, or `alignment` bytes more for an over-aligned
// block, and the program gets the address after the header. A pointer without a
// valid header (allocated before the runtime started, or by __libc_malloc itself)
// goes back to glibc as it is. Before the runtime is active, or when it is
// disabled, blocks have no header.
#include <errno.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>

#include "diagnostics.hpp"
#include "hot_path.hpp"
#include "sanitizer.hpp"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* p);
}

#ifdef HEAPTYPE_SANITIZER
// See sanitizer.hpp: the executable's constructors run after every sanitizer
// runtime's start-up, and this one runs before the program's own.
bool heaptype::runtime::g_sanitizer_ready = false;
__attribute__((constructor(101))) static void heaptype_sanitizer_is_up() {
  __atomic_store_n(&heaptype::runtime::g_sanitizer_ready, true, __ATOMIC_RELEASE);
}
#endif

namespace {

namespace rt = heaptype::runtime;

constexpr size_t kDefault = alignof(std::max_align_t);

inline bool is_power_of_two(size_t n) { return n && !(n & (n - 1)); }

inline size_t round_up_to_power_of_two(size_t n) {
  size_t p = 1;
  while (p < n && p) p <<= 1;
  return p;
}

// Where the program's bytes start in a glibc allocation of the given alignment:
// after the 16-byte header, or `alignment` bytes in for an over-aligned block (so
// that they stay aligned). False for alignments the header cannot describe.
inline bool header_offset_code(size_t alignment, unsigned* code) {
  if (alignment <= kDefault) {
    *code = 0;
    return true;
  }
  unsigned shift = static_cast<unsigned>(__builtin_ctzl(alignment));
  if (shift - 4 > rt::kMaxOffsetCode) return false;
  *code = shift - 4;
  return true;
}

void* raw_allocate(size_t size, size_t alignment) {
  if (alignment <= kDefault) return __libc_malloc(size);
  return __libc_memalign(alignment, size);
}

// `size` bytes for the program, aligned to `alignment` (a power of two); null when
// glibc has no memory.
__attribute__((always_inline)) inline void* allocate(size_t size, size_t alignment, void* call_site, void* frame) {
  unsigned code;
  if (!rt::runtime_active() || !header_offset_code(alignment, &code)) return raw_allocate(size, alignment);
  size_t offset = rt::header_offset(code);
  if (size > SIZE_MAX - offset) return nullptr;
  char* base = static_cast<char*>(code ? __libc_memalign(alignment, size + offset) : __libc_malloc(size + offset));
  if (__builtin_expect(!base, 0)) return nullptr;
  void* p = base + offset;
  if (__builtin_expect(code == 0, 1))
    rt::on_new_block(p, size, reinterpret_cast<uintptr_t>(call_site), reinterpret_cast<uintptr_t>(frame));
  else
    rt::on_block(p, size, code, reinterpret_cast<uintptr_t>(call_site), reinterpret_cast<uintptr_t>(frame));
  return p;
}

// [new.delete.single]: call the new_handler until it succeeds or there is none.
__attribute__((always_inline)) inline void* allocate_or_throw(size_t size, size_t alignment, void* call_site,
                                                             void* frame) {
  if (alignment < kDefault) alignment = kDefault;
  for (;;) {
    if (void* p = allocate(size ? size : 1, alignment, call_site, frame)) return p;
    std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}

inline void* allocate_or_null(size_t size, size_t alignment, void* call_site, void* frame) noexcept {
  try {
    return allocate_or_throw(size, alignment, call_site, frame);
  } catch (...) {
    return nullptr;
  }
}

// free() (or a plain delete) of the pointer new[] returned for a type with an array
// cookie: it lies 8 bytes (16 for a 16-aligned type) into one of our blocks. glibc
// would be handed a pointer that starts no allocation and crash on it; like Valgrind
// ("mismatched free() / delete / delete []") say so, once, and free the block.
void* array_block_of(void* p) {
  if (rt::sanitizer_block(p)) return nullptr;  // the memory before it may be unmapped
  for (size_t cookie : {sizeof(size_t), 2 * sizeof(size_t)}) {
    char* block = static_cast<char*>(p) - cookie;
    unsigned code;
    if (!rt::header_readable(block) || !rt::sealed_header(block, &code)) continue;
    size_t count;
    std::memcpy(&count, static_cast<char*>(p) - sizeof count, sizeof count);
    if (count) return block;
  }
  return nullptr;
}

void say_mismatched_free() {
  static bool said = false;
  if (said) return;
  said = true;
  rt::say("mismatched free() / delete of an array made with new[]: the pointer is past the array's "
          "cookie; the block is freed (use delete[])");
}

inline void release(void* p) noexcept;

__attribute__((noinline)) void release_foreign(void* p) noexcept {
  if (void* block = array_block_of(p)) {
    say_mismatched_free();
    return release(block);
  }
  rt::on_foreign_release(p);
  __libc_free(p);
}

__attribute__((always_inline)) inline void release(void* p) noexcept {
  if (!p) return;
  if (!rt::headers_on()) return __libc_free(p);
  unsigned code;
  rt::BlockHeader* h = rt::sealed_header(p, &code);
  if (!h) return release_foreign(p);
  if (!rt::on_free_block(p, h)) return;  // another thread's block on probation: its owner releases it
  h->seal = 0;                         // a second free of it is a foreign free (glibc reports it)
  __libc_free(rt::allocation_base(p, code));
}

// The program's bytes of a block of ours: the header's size, or what glibc gives.
size_t block_size(void* p, const rt::BlockHeader* h, unsigned code) {
  if (h->size != rt::kSizeSaturated) return h->size;
  return rt::libc_usable_size(rt::allocation_base(p, code)) - rt::header_offset(code);
}

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

// The return address and frame of the replaced function itself: the runtime is
// built with frame pointers, so the frame holds the caller's frame pointer and the
// return address, where a frame-pointer walk starts.
#define HEAPTYPE_CALLER __builtin_return_address(0), __builtin_frame_address(0)
#define HEAPTYPE_EXPORT __attribute__((visibility("default"), noinline))

HEAPTYPE_EXPORT void* operator new(size_t size) { return allocate_or_throw(size, kDefault, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void* operator new[](size_t size) { return allocate_or_throw(size, kDefault, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void* operator new(size_t size, const std::nothrow_t&) noexcept {
  return allocate_or_null(size, kDefault, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  return allocate_or_null(size, kDefault, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new(size_t size, std::align_val_t align) {
  return allocate_or_throw(size, static_cast<size_t>(align), HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new[](size_t size, std::align_val_t align) {
  return allocate_or_throw(size, static_cast<size_t>(align), HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new(size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return allocate_or_null(size, static_cast<size_t>(align), HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new[](size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return allocate_or_null(size, static_cast<size_t>(align), HEAPTYPE_CALLER);
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

namespace {

// C's aligned allocations: glibc accepts any alignment and rounds it up.
inline void* allocate_aligned(size_t alignment, size_t size, void* call_site, void* frame) {
  return allocate(size, round_up_to_power_of_two(alignment < kDefault ? kDefault : alignment), call_site, frame);
}

// realloc of a block of ours that must move to a new block of ours: an
// over-aligned one, or one on probation (another thread may be freeing it).
void* move_block(void* old, const rt::BlockHeader* h, unsigned code, size_t size, void* call_site, void* frame) {
  void* p = allocate(size, kDefault, call_site, frame);
  if (!p) return nullptr;
  size_t old_size = block_size(old, h, code);
  std::memcpy(p, old, old_size < size ? old_size : size);
  release(old);
  return p;
}

}  // namespace

extern "C" {

HEAPTYPE_EXPORT void* malloc(size_t size) { return allocate(size, kDefault, HEAPTYPE_CALLER); }

HEAPTYPE_EXPORT void free(void* p) { release(p); }

HEAPTYPE_EXPORT void* calloc(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes) || bytes > SIZE_MAX - rt::kHeaderSize) {
    errno = ENOMEM;
    return nullptr;
  }
  if (!rt::runtime_active()) return __libc_calloc(count, size);
  char* base = static_cast<char*>(__libc_calloc(1, bytes + rt::kHeaderSize));
  if (!base) return nullptr;
  void* p = base + rt::kHeaderSize;
  rt::on_new_block(p, bytes, reinterpret_cast<uintptr_t>(__builtin_return_address(0)),
                   reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
  return p;
}

HEAPTYPE_EXPORT void* realloc(void* old, size_t size) {
  if (!old) return allocate(size, kDefault, HEAPTYPE_CALLER);
  unsigned code;
  rt::BlockHeader* h = rt::headers_on() ? rt::sealed_header(old, &code) : nullptr;
  if (!h) {
    // Not ours: glibc's, and the new block stays unknown to the profile too.
    if (rt::headers_on()) rt::on_foreign_release(old);
    return __libc_realloc(old, size);
  }
  if (size == 0) {  // glibc frees the block and returns null
    release(old);
    return nullptr;
  }
  if (code || (rt::load_owner(h) & rt::kOwnerProbation) || size > SIZE_MAX - rt::kHeaderSize)
    return move_block(old, h, code, size, HEAPTYPE_CALLER);
  // The header travels with the bytes: nothing else names the old address, so
  // another thread handed the old address right away cannot be confused with it.
  rt::BlockHeader saved = *h;
  char* base = static_cast<char*>(__libc_realloc(rt::allocation_base(old, 0), size + rt::kHeaderSize));
  if (!base) return nullptr;  // the old block is untouched
  void* p = base + rt::kHeaderSize;
  *rt::header_of(p) = saved;  // sealed for the old address until the free is recorded
  rt::on_reallocated(old, p, saved, size, reinterpret_cast<uintptr_t>(__builtin_return_address(0)),
                     reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
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
  return allocate_aligned(alignment, size, HEAPTYPE_CALLER);
}

HEAPTYPE_EXPORT void* aligned_alloc(size_t alignment, size_t size) {
  return allocate_aligned(alignment, size, HEAPTYPE_CALLER);
}

HEAPTYPE_EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  if (!is_power_of_two(alignment) || alignment % sizeof(void*) != 0) return EINVAL;
  void* p = allocate_aligned(alignment, size, HEAPTYPE_CALLER);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

HEAPTYPE_EXPORT void* valloc(size_t size) {
  return allocate_aligned(static_cast<size_t>(getpagesize()), size, HEAPTYPE_CALLER);
}

HEAPTYPE_EXPORT void* pvalloc(size_t size) {
  size_t page = static_cast<size_t>(getpagesize());
  size_t rounded = (size + page - 1) & ~(page - 1);
  return allocate_aligned(page, rounded ? rounded : page, HEAPTYPE_CALLER);
}

// The program's share of a block of ours (glibc's figure minus the header).
HEAPTYPE_EXPORT size_t malloc_usable_size(void* p) {
  if (!p) return 0;
  unsigned code;
  if (rt::headers_on())
    if (rt::sealed_header(p, &code))
      return rt::libc_usable_size(rt::allocation_base(p, code)) - rt::header_offset(code);
  return rt::libc_usable_size(p);
}

}  // extern "C"
