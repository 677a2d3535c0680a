// exception_types.cpp: see exception_types.hpp.
//
// Our definitions are weak: a program that links a C++ runtime statically (zig's
// Clang with libc++abi, g++ -static-libstdc++) gets that runtime's strong definitions
// without a clash, and its thrown objects keep the row "C++ runtime: exception
// object". In a process with a shared C++ runtime ours come first in the lookup order
// (the executable, which links the static runtime, or the preloaded library) and
// RTLD_NEXT is the C++ runtime's.
#include "exception_types.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "tracker.hpp"

namespace std {
class type_info;
}

namespace heaptype {
namespace runtime {
namespace {

using Destructor = void (*)(void*);
using ThrowFunction = void (*)(void*, std::type_info*, Destructor);
using InitFunction = void* (*)(void*, std::type_info*, Destructor);

std::atomic<ThrowFunction> g_next_throw{nullptr};
std::atomic<InitFunction> g_next_init{nullptr};

// The ABI header in front of a primary exception's object: libstdc++'s
// __cxa_refcounted_exception, 128 bytes on x86-64 (measured with GCC 12: the object
// lies 128 bytes into the block malloc returned).
constexpr uintptr_t kPrimaryExceptionHeader = 128;

// The thrown object's block becomes one object of the thrown type. The block is
// looked up in the exact table of block starts, and must reach past the object:
// then it is the object's block (blocks do not overlap), whatever the C++ runtime's
// header size. An object from libstdc++'s emergency pool (malloc failed) lies inside
// the pool's block, starts no block of ours, and is left alone; so is one behind a
// header of another size (libc++abi's, not measured here).
void type_thrown_object(void* object, std::type_info* type) {
  uintptr_t address = reinterpret_cast<uintptr_t>(object);
  if (!type || address <= kPrimaryExceptionHeader) return;
  on_retype_block(reinterpret_cast<void*>(address - kPrimaryExceptionHeader), kPrimaryExceptionHeader,
                  reinterpret_cast<uintptr_t>(type), 0, 1);
}

template <class Function>
Function next_definition(std::atomic<Function>& slot, const char* name) {
  Function f = slot.load(std::memory_order_acquire);
  if (!f) {
    f = reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
    slot.store(f, std::memory_order_release);
  }
  return f;
}

// The start-up found it, or this is a throw before the runtime started (a static
// constructor's; the start-up is not forced from here, where a sanitizer may not be
// up yet). A process without a definition behind ours cannot get here (see the top).
template <class Function>
Function next_or_abort(std::atomic<Function>& slot, const char* name) {
  Function f = next_definition(slot, name);
  if (!f) abort();
  return f;
}

}  // namespace

void find_next_exception_functions() {
  next_definition(g_next_throw, "__cxa_throw");
  next_definition(g_next_init, "__cxa_init_primary_exception");
}

}  // namespace runtime
}  // namespace heaptype

using heaptype::runtime::Destructor;

extern "C" {

// A static C++ runtime's member that defines __cxa_throw also defines __cxa_rethrow
// (libstdc++'s eh_throw.o, libc++abi's cxa_exception.o). The linker does not pull an
// archive member for a symbol already defined, even weakly: this reference pulls it,
// so its strong __cxa_throw replaces ours rather than leaving a program with no
// definition for ours to go on to.
void __cxa_rethrow();
__attribute__((used)) void (*const heaptype_links_the_cxx_runtime_throw)() = &__cxa_rethrow;

// The C++ runtime's __cxa_throw, which does not return, is called last, as a tail
// call (a jump): no frame of the runtime's stays under it, so the program's own stack
// traces (a terminate handler's backtrace(), kj's, a test framework's that drops a
// fixed number of frames) are the ones they are without HeapType.
__attribute__((visibility("default"), weak)) void __cxa_throw(void* object, std::type_info* type,
                                                            Destructor destroy) {
  heaptype::runtime::type_thrown_object(object, type);
  heaptype::runtime::next_or_abort(heaptype::runtime::g_next_throw, "__cxa_throw")(object, type, destroy);
}

// std::make_exception_ptr (GCC 7 and later, with RTTI): the object is allocated
// and typed here before it is constructed; no throw follows.
__attribute__((visibility("default"), weak)) void* __cxa_init_primary_exception(void* object, std::type_info* type,
                                                                                Destructor destroy) noexcept {
  heaptype::runtime::type_thrown_object(object, type);
  return heaptype::runtime::next_or_abort(heaptype::runtime::g_next_init, "__cxa_init_primary_exception")(
      object, type, destroy);
}
}
