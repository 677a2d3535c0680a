// sanitizer.hpp: the runtime built with AddressSanitizer or ThreadSanitizer
// (tests/python/test_sanitizers.py). Nothing here changes a normal build.
//
// A sanitizer owns the heap: it intercepts malloc and free (libasan and libtsan
// even define __libc_memalign), and it must see every block, or ASan reports a
// free of memory it never handed out and TSan reports races on reused memory. So
// in a sanitizer build the runtime takes its blocks from the sanitizer's allocator
// (its __interceptor_* entry points, which the executable's own malloc does not
// replace) where a normal build calls glibc's __libc_* functions. Headers stay in
// front of the program's bytes, inside the sanitizer's block.
//
// The runtime also reads the 16 bytes before pointers it may not own (a free of a
// block allocated before it started, placement new on the stack): there the
// sanitizer keeps its own chunk header or a redzone, which ASan would report.
// HEAPTYPE_NO_ASAN exempts those reads.
//
// The sanitizer's own start-up calls malloc (dlsym does) before its shadow memory
// exists, and TSan calls realloc in each new thread before that thread may run
// instrumented code. So the allocation functions (allocation_hooks.cpp; under TSan
// the whole runtime) are built without the sanitizer's instrumentation but with
// -DHEAPTYPE_SANITIZER=1, and until the sanitizer is up they pass every call
// straight through: the runtime starts at the first allocation after the
// executable's earliest constructor (sanitizer_ready()), when every sanitizer
// runtime has been initialised. A thread that allocates while another starts the
// runtime does not wait for it (control.cpp): under TSan that thread may be the
// one the start-up's pthread_create waits for.
#ifndef HEAPTYPE_RUNTIME_SANITIZER_HPP
#define HEAPTYPE_RUNTIME_SANITIZER_HPP

#include <cstddef>

#if defined(HEAPTYPE_SANITIZER)
#elif defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HEAPTYPE_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HEAPTYPE_SANITIZER 1
#endif
#endif

// HEAPTYPE_LSAN: AddressSanitizer's leak checker runs at exit, before the runtime
// finishes, and does not scan the runtime's own pages (internal_memory.cpp), where
// blocks on probation that another thread freed wait for their owner: those pages
// are registered as roots, or it would report those blocks as leaked.
#if defined(__SANITIZE_ADDRESS__)
#define HEAPTYPE_NO_ASAN __attribute__((no_sanitize_address))
#define HEAPTYPE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAPTYPE_NO_ASAN __attribute__((no_sanitize_address))
#define HEAPTYPE_LSAN 1
#endif
#endif
#ifndef HEAPTYPE_NO_ASAN
#define HEAPTYPE_NO_ASAN
#endif

#ifdef HEAPTYPE_SANITIZER
extern "C" {
void* __interceptor_malloc(size_t size);
void* __interceptor_calloc(size_t count, size_t size);
void* __interceptor_realloc(void* p, size_t size);
void* __interceptor_memalign(size_t alignment, size_t size);
void __interceptor_free(void* p);
int __sanitizer_get_ownership(const volatile void* p);
size_t __sanitizer_get_allocated_size(const volatile void* p);
}
// The names the runtime's code uses for "the allocator behind ours".
#define __libc_malloc __interceptor_malloc
#define __libc_calloc __interceptor_calloc
#define __libc_realloc __interceptor_realloc
#define __libc_memalign __interceptor_memalign
#define __libc_free __interceptor_free

namespace heaptype {
namespace runtime {
extern bool g_sanitizer_ready;  // set by a constructor(101) in allocation_hooks.cpp
inline bool sanitizer_ready() { return __atomic_load_n(&g_sanitizer_ready, __ATOMIC_ACQUIRE); }
// A block the sanitizer handed out itself (allocated before the runtime started,
// or by an interceptor such as strdup): no header of ours before it, and under
// TSan maybe no readable memory either.
// (ASan's ownership is true at a block's start only, TSan's anywhere inside it;
// TSan's allocated size is 0 inside a block, ASan's reports an error there.)
inline bool sanitizer_block(const void* p) {
  return __sanitizer_get_ownership(p) && __sanitizer_get_allocated_size(p) != 0;
}
}  // namespace runtime
}  // namespace heaptype
#else
namespace heaptype {
namespace runtime {
constexpr bool sanitizer_ready() { return true; }
constexpr bool sanitizer_block(const void*) { return false; }
}  // namespace runtime
}  // namespace heaptype
#endif

#endif
