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

// What a type-aware operator new knows of its block: the type and how to count
// its objects.
struct TypedBlock {
  uintptr_t type_tag;  // 0: an untyped allocation
  size_t elem_size;
  size_t cookie;       // bytes before the objects (an array cookie), 0 if none
  bool array;
};

constexpr TypedBlock kUntyped = {0, 0, 0, false};

// The runtime's block for `size` bytes at `p` (glibc's allocation at `base`, the
// header's offset code `code`), recorded. kOrdinary: the caller saw rt::ordinary().
template <bool kOrdinary>
__attribute__((always_inline)) inline void* record_block(char* base, void* p, size_t size, unsigned code,
                                                         unsigned family, void* call_site, void* frame,
                                                         const TypedBlock& typed) {
  if (__builtin_expect(!rt::mark_block_start(p), 0)) return base;  // beyond the table: no header, not ours
  uintptr_t site = reinterpret_cast<uintptr_t>(call_site), fp = reinterpret_cast<uintptr_t>(frame);
  if (typed.type_tag) {
    uint64_t count = 1;
    if (typed.array) count = size > typed.cookie ? (size - typed.cookie) / typed.elem_size : 0;
    if (__builtin_expect(code == 0, 1))
      rt::on_typed_block<kOrdinary>(p, size, family, typed.type_tag, count, site, fp);
    else
      rt::on_typed_aligned_block(p, size, code, family, typed.type_tag, count, site, fp);
  } else if (__builtin_expect(code == 0, 1)) {
    rt::on_new_block<kOrdinary>(p, size, family, site, fp);
  } else {
    rt::on_block(p, size, code, family, site, fp);
  }
  return p;
}

// allocate() when the runtime is not in its ordinary case (see rt::ordinary()), or the
// block is over-aligned.
__attribute__((noinline)) void* allocate_in_general(size_t size, size_t alignment, unsigned family, void* call_site,
                                                    void* frame, const TypedBlock& typed) {
  unsigned code;
  if (!rt::runtime_active() || !header_offset_code(alignment, &code)) return raw_allocate(size, alignment);
  size_t offset = rt::header_offset(code);
  if (size > SIZE_MAX - offset) return nullptr;
  char* base = static_cast<char*>(code ? __libc_memalign(alignment, size + offset) : __libc_malloc(size + offset));
  if (__builtin_expect(!base, 0)) return nullptr;
  return record_block<false>(base, base + offset, size, code, family, call_site, frame, typed);
}

// `size` bytes for the program, aligned to `alignment` (a power of two), by a
// function of `family`; null when glibc has no memory.
__attribute__((always_inline)) inline void* allocate(size_t size, size_t alignment, unsigned family, void* call_site,
                                                     void* frame, const TypedBlock& typed = kUntyped) {
  if (__builtin_expect(alignment > kDefault || !rt::ordinary(), 0))
    return allocate_in_general(size, alignment, family, call_site, frame, typed);
  if (size > SIZE_MAX - rt::kHeaderSize) return nullptr;
  char* base = static_cast<char*>(__libc_malloc(size + rt::kHeaderSize));
  if (__builtin_expect(!base, 0)) return nullptr;
  return record_block<true>(base, base + rt::kHeaderSize, size, 0, family, call_site, frame, typed);
}

// [new.delete.single]: call the new_handler until it succeeds or there is none.
__attribute__((always_inline)) inline void* allocate_or_throw(size_t size, size_t alignment, unsigned family,
                                                             void* call_site, void* frame,
                                                             const TypedBlock& typed = kUntyped) {
  if (alignment < kDefault) alignment = kDefault;
  for (;;) {
    if (void* p = allocate(size ? size : 1, alignment, family, call_site, frame, typed)) return p;
    std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}

inline void* allocate_or_null(size_t size, size_t alignment, unsigned family, void* call_site, void* frame) noexcept {
  try {
    return allocate_or_throw(size, alignment, family, call_site, frame);
  } catch (...) {
    return nullptr;
  }
}

// free() (or a plain delete) of the pointer new[] returned for a type with an array
// cookie: it lies 8 bytes (16 for a 16-aligned type) into one of our blocks. glibc
// would be handed a pointer that starts no allocation and crash on it; like Valgrind
// ("mismatched free() / delete / delete []") it is a finding, said once, and the
// block is freed.
void* array_block_of(void* p) {
  if (rt::sanitizer_block(p)) return nullptr;  // the memory before it may be unmapped
  for (size_t cookie : {sizeof(size_t), 2 * sizeof(size_t)}) {
    char* block = static_cast<char*>(p) - cookie;
    unsigned code;
    if (!rt::sealed_header(block, &code)) continue;
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
  rt::note("mismatched free() / delete of an array made with new[]: the pointer is past the array's "
          "cookie; the block is freed (use delete[])");
}

inline void release(void* p, unsigned family, void* call_site, void* frame) noexcept;

// A release by a function of `family` (kFamilyAny: the runtime's own) of a pointer
// that starts none of our blocks.
__attribute__((noinline)) void release_foreign(void* p, unsigned family, void* call_site, void* frame) noexcept {
  if (void* block = array_block_of(p)) {
    say_mismatched_free();
    unsigned code;
    if (family != rt::kFamilyAny)
      rt::on_finding(block, rt::sealed_header(block, &code), static_cast<unsigned>(heaptype::format::FindingKind::kMismatchedFree),
                     rt::kFamilyArray, family, reinterpret_cast<uintptr_t>(call_site),
                     reinterpret_cast<uintptr_t>(frame));
    return release(block, rt::kFamilyAny, call_site, frame);
  }
  rt::on_foreign_release(p);
  __libc_free(p);
}

// free(), delete or delete[] of a block another family allocated: a finding.
__attribute__((noinline)) void mismatched_release(void* p, const rt::BlockHeader* h, unsigned allocated,
                                                  unsigned released, void* call_site, void* frame) noexcept {
  rt::on_finding(p, h, static_cast<unsigned>(heaptype::format::FindingKind::kMismatchedFree), allocated, released,
                 reinterpret_cast<uintptr_t>(call_site), reinterpret_cast<uintptr_t>(frame));
}

// Releases the block of ours at p (header h, marked at `mark`), for the hook whose
// frame address is `frame`. kOrdinary: the caller saw rt::ordinary().
template <bool kOrdinary>
__attribute__((always_inline)) inline void release_sealed(void* p, rt::BlockHeader* h, unsigned code, uint8_t* mark,
                                                          void* frame) noexcept {
  // false: another thread's block on probation, which its owner releases
  if (!rt::on_free_block<kOrdinary>(p, h, code, reinterpret_cast<uintptr_t>(frame))) return;
  rt::clear_block_start(mark);  // before glibc may hand the memory out again; a second free
                                // of p is then a foreign free (glibc reports it)
  if (!kOrdinary && __builtin_expect(rt::g_keep_released_memory, 0)) return;
  __libc_free(rt::allocation_base(p, code));
}

// A block of ours at p, released by a function of `family`. kOrdinary: the caller saw
// rt::ordinary().
template <bool kOrdinary>
__attribute__((always_inline)) inline void release_block(void* p, unsigned family, void* call_site,
                                                         void* frame) noexcept {
  unsigned code, allocated;
  uint8_t* mark;
  rt::BlockHeader* h = rt::sealed_header(p, &code, &allocated, &mark);
  if (!h) return release_foreign(p, family, call_site, frame);
  if (__builtin_expect(allocated != family && family != rt::kFamilyAny, 0))
    mismatched_release(p, h, allocated, family, call_site, frame);
  release_sealed<kOrdinary>(p, h, code, mark, frame);
}

// release() when the runtime is not in its ordinary case (see rt::ordinary()).
__attribute__((noinline)) void release_in_general(void* p, unsigned family, void* call_site, void* frame) noexcept {
  if (!rt::headers_on()) return __libc_free(p);
  release_block<false>(p, family, call_site, frame);
}

// Releases the block at p for a function of `family`; `call_site` and `frame` are
// the release function's own (for a finding's call path).
__attribute__((always_inline)) inline void release(void* p, unsigned family, void* call_site, void* frame) noexcept {
  if (!p) return;
  if (__builtin_expect(!rt::ordinary(), 0)) return release_in_general(p, family, call_site, frame);
  release_block<true>(p, family, call_site, frame);
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

HEAPTYPE_EXPORT void* operator new(size_t size) { return allocate_or_throw(size, kDefault, rt::kFamilyNew, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void* operator new[](size_t size) { return allocate_or_throw(size, kDefault, rt::kFamilyArray, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void* operator new(size_t size, const std::nothrow_t&) noexcept {
  return allocate_or_null(size, kDefault, rt::kFamilyNew, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  return allocate_or_null(size, kDefault, rt::kFamilyArray, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new(size_t size, std::align_val_t align) {
  return allocate_or_throw(size, static_cast<size_t>(align), rt::kFamilyNew, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new[](size_t size, std::align_val_t align) {
  return allocate_or_throw(size, static_cast<size_t>(align), rt::kFamilyArray, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new(size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return allocate_or_null(size, static_cast<size_t>(align), rt::kFamilyNew, HEAPTYPE_CALLER);
}
HEAPTYPE_EXPORT void* operator new[](size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return allocate_or_null(size, static_cast<size_t>(align), rt::kFamilyArray, HEAPTYPE_CALLER);
}

HEAPTYPE_EXPORT void operator delete(void* p) noexcept { release(p, rt::kFamilyNew, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void operator delete[](void* p) noexcept { release(p, rt::kFamilyArray, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept { release(p, rt::kFamilyNew, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p, rt::kFamilyArray, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void operator delete(void* p, size_t) noexcept { release(p, rt::kFamilyNew, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void operator delete[](void* p, size_t) noexcept { release(p, rt::kFamilyArray, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void operator delete(void* p, std::align_val_t) noexcept { release(p, rt::kFamilyNew, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void operator delete[](void* p, std::align_val_t) noexcept { release(p, rt::kFamilyArray, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p, rt::kFamilyNew, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p, rt::kFamilyArray, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p, rt::kFamilyNew, HEAPTYPE_CALLER); }
HEAPTYPE_EXPORT void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p, rt::kFamilyArray, HEAPTYPE_CALLER); }

// --- type-aware operator new (heaptype/type_aware_new.hpp) ---------------------------------

namespace {

// `kind` of heaptype_typed_new/delete: what the new-expression allocates.
// kAllocator: libc++'s std::allocator (heaptype-libcxx/__new/allocate.h): n objects,
// released with operator delete.
enum TypedKind : unsigned { kSingle = 0, kArrayNoCookie = 1, kArrayWithCookie = 2, kAllocator = 3, kNothrow = 4 };

inline size_t array_cookie(size_t alignment) { return alignment > sizeof(size_t) ? alignment : sizeof(size_t); }

// A delete (kSingle) or delete[] of a block whose size disagrees with the static
// type's `size` (the bytes Clang passes: sizeof(T), or the whole array's with its
// cookie).
inline bool size_disagrees(const rt::BlockHeader* h, size_t size, unsigned kind) {
  if (h->size == rt::kSizeSaturated || h->size == size) return false;
  if (kind == kArrayNoCookie) return size == 0 || h->size % size != 0;
  return true;
}

__attribute__((noinline)) void mismatched_delete(void* p, const rt::BlockHeader* h, const void* type_tag, size_t size,
                                                 void* call_site, void* frame) noexcept {
  rt::on_finding(p, h, static_cast<unsigned>(heaptype::format::FindingKind::kMismatchedDelete),
                 reinterpret_cast<uintptr_t>(type_tag), size, reinterpret_cast<uintptr_t>(call_site),
                 reinterpret_cast<uintptr_t>(frame));
}

__attribute__((noinline)) void* typed_new_nothrow(size_t size, size_t alignment, unsigned family,
                                                  const TypedBlock& typed, void* call_site, void* frame) noexcept {
  try {
    return allocate_or_throw(size, alignment, family, call_site, frame, typed);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

extern "C" {

// The new-expression `new T` / `new T[n]` of a type-aware build: one entry into the
// runtime, with the type and the size together.
HEAPTYPE_EXPORT void* heaptype_typed_new(size_t size, size_t alignment, const void* type_tag, size_t elem_size,
                                         unsigned kind) {
  // The common case inline: one object, allocate()'s ordinary path; the rest (no memory
  // yet, arrays, nothrow) below.
  if (__builtin_expect(kind == kSingle && size, 1)) {
    TypedBlock one = {reinterpret_cast<uintptr_t>(type_tag), elem_size ? elem_size : 1, 0, false};
    if (void* p = allocate(size, alignment, rt::kFamilyNew, HEAPTYPE_CALLER, one)) return p;
  }
  bool nothrow = kind & kNothrow;
  kind &= ~kNothrow;
  TypedBlock typed = {reinterpret_cast<uintptr_t>(type_tag), elem_size ? elem_size : 1,
                      kind == kArrayWithCookie ? array_cookie(alignment) : 0, kind != kSingle};
  unsigned family = kind == kSingle || kind == kAllocator ? rt::kFamilyNew : rt::kFamilyArray;
  if (__builtin_expect(nothrow, 0)) return typed_new_nothrow(size, alignment, family, typed, HEAPTYPE_CALLER);
  return allocate_or_throw(size, alignment, family, HEAPTYPE_CALLER, typed);
}

// `delete p` / `delete[] p` of a type-aware build, with the static type and its size.
HEAPTYPE_EXPORT void heaptype_typed_delete(void* p, const void* type_tag, size_t size, unsigned kind) noexcept {
  if (!p) return;
  unsigned family = kind == kSingle ? rt::kFamilyNew : rt::kFamilyArray;
  if (!rt::headers_on()) return __libc_free(p);
  unsigned code, allocated;
  uint8_t* mark;
  rt::BlockHeader* h = rt::sealed_header(p, &code, &allocated, &mark);
  if (!h) return release_foreign(p, family, HEAPTYPE_CALLER);
  if (__builtin_expect(allocated != family, 0))
    mismatched_release(p, h, allocated, family, HEAPTYPE_CALLER);
  else if (__builtin_expect(size_disagrees(h, size, kind), 0))
    mismatched_delete(p, h, type_tag, size, HEAPTYPE_CALLER);
  if (__builtin_expect(rt::ordinary(), 1))
    release_sealed<true>(p, h, code, mark, __builtin_frame_address(0));
  else
    release_sealed<false>(p, h, code, mark, __builtin_frame_address(0));
}

}  // extern "C"

// --- the C allocation functions ------------------------------------------------------

namespace {

// C's aligned allocations: glibc accepts any alignment and rounds it up.
inline void* allocate_aligned(size_t alignment, size_t size, void* call_site, void* frame) {
  return allocate(size, round_up_to_power_of_two(alignment < kDefault ? kDefault : alignment), rt::kFamilyMalloc,
                  call_site, frame);
}

// realloc of a block of ours that must move to a new block of ours: an
// over-aligned one, or one on probation (another thread may be freeing it).
void* move_block(void* old, const rt::BlockHeader* h, unsigned code, size_t size, void* call_site, void* frame) {
  void* p = allocate(size, kDefault, rt::kFamilyMalloc, call_site, frame);
  if (!p) return nullptr;
  size_t old_size = block_size(old, h, code);
  std::memcpy(p, old, old_size < size ? old_size : size);
  release(old, rt::kFamilyAny, call_site, frame);
  return p;
}

// realloc moved a block of ours to `p`, an address the table of block starts cannot
// cover: the program gets the bytes at the allocation's start instead, as a block
// that is not ours, and the profile sees the old block freed.
void* foreign_copy(void* old, void* p, const rt::BlockHeader& saved, size_t size) {
  void* base = rt::allocation_base(p, 0);
  std::memmove(base, p, size);
  rt::on_reallocated_away(old, saved);
  return base;
}

}  // namespace

extern "C" {

HEAPTYPE_EXPORT void* malloc(size_t size) { return allocate(size, kDefault, rt::kFamilyMalloc, HEAPTYPE_CALLER); }

HEAPTYPE_EXPORT void free(void* p) { release(p, rt::kFamilyMalloc, HEAPTYPE_CALLER); }

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
  if (__builtin_expect(!rt::mark_block_start(p), 0)) return base;  // beyond the table: not ours
  rt::on_new_block<false>(p, bytes, rt::kFamilyMalloc, reinterpret_cast<uintptr_t>(__builtin_return_address(0)),
                   reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
  return p;
}

HEAPTYPE_EXPORT void* realloc(void* old, size_t size) {
  if (!old) return allocate(size, kDefault, rt::kFamilyMalloc, HEAPTYPE_CALLER);
  unsigned code;
  rt::BlockHeader* h = rt::headers_on() ? rt::sealed_header(old, &code) : nullptr;
  if (!h) {
    // Not ours: glibc's, and the new block stays unknown to the profile too.
    if (rt::headers_on()) rt::on_foreign_release(old);
    return __libc_realloc(old, size);
  }
  if (size == 0) {  // glibc frees the block and returns null
    release(old, rt::kFamilyAny, HEAPTYPE_CALLER);
    return nullptr;
  }
  // A block of this thread still waiting for its type gets none from a realloc: it
  // leaves probation untyped and moves as any other (heaptrack's order: the old
  // block's free, then the new block).
  if (rt::load_owner(h) & rt::kOwnerProbation) rt::end_own_probation(old, h);
  if (code || (rt::load_owner(h) & rt::kOwnerProbation) || size > SIZE_MAX - rt::kHeaderSize)
    return move_block(old, h, code, size, HEAPTYPE_CALLER);
  // The header travels with the bytes: nothing else names the old address, so
  // another thread handed the old address right away cannot be confused with it.
  rt::BlockHeader saved = *h;
  // Unmarked first: once glibc has moved the block, another thread may be given the
  // old memory and mark a block of its own there.
  rt::clear_block_start(old);
  char* base = static_cast<char*>(__libc_realloc(rt::allocation_base(old, 0), size + rt::kHeaderSize));
  if (!base) {
    rt::mark_block_start(old);  // the old block is untouched, and its leaf exists
    return nullptr;
  }
  void* p = base + rt::kHeaderSize;
  *rt::header_of(p) = saved;  // sealed for the old address until the free is recorded
  if (__builtin_expect(!rt::mark_block_start(p), 0)) return foreign_copy(old, p, saved, size);
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
