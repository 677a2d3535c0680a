// heaptype/heaptype.hpp: the program-facing API of the HeapType runtime.
//
//   heaptype::start(), heaptype::stop()   record new allocations, or not (frees of
//                                         recorded blocks are always recorded)
//   heaptype::dump(path)                  write the profile so far to `path`
//   heaptype::tag<T>(p, n)                name a block from malloc or a pool as T[n]
//   heaptype::untag(p)                    that block is released
//   heaptype::New_<T>(n)                  `new T[n]` with the count known exactly
//   heaptype::New_<T, Label>(n)           ... counted as the pseudo type `T [Label]`
//
// Profiling is on from the first allocation unless HEAPTYPE_DISABLE=1;
// HEAPTYPE_START=stopped begins stopped; HEAPTYPE_OUTPUT names the file
// (%p: pid, %e: program name; default heaptype.%e.%p.htp).
#ifndef HEAPTYPE_HEAPTYPE_HPP
#define HEAPTYPE_HEAPTYPE_HPP

#include <cstddef>
#include <new>

#include "hint.hpp"
#include "type_id.hpp"

extern "C" {
void heaptype_start(void);
void heaptype_stop(void);
int heaptype_dump(const char* path);
int heaptype_is_recording(void);
const char* heaptype_output_path(void);
void heaptype_tag_block(const void* p, const void* type_tag, std::size_t elem_size, std::size_t count);
void heaptype_untag(const void* p);
}

namespace heaptype {

inline void start() { heaptype_start(); }
inline void stop() { heaptype_stop(); }
inline bool dump(const char* path) { return heaptype_dump(path) != 0; }
inline bool recording() { return heaptype_is_recording() != 0; }
// The file this process writes, or nullptr when profiling is off.
inline const char* output_path() { return heaptype_output_path(); }

// The paper's LogMemoryType: `p` holds `n` objects of type T. A block HeapType
// already tracks is renamed; any other memory becomes a tracked block of
// n * sizeof(T) bytes until untag(p).
template <class T>
inline void tag(const T* p, std::size_t n = 1) {
  heaptype_tag_block(p, tag_of<T>(), sizeof(T), n);
}

inline void untag(const void* p) { heaptype_untag(p); }

#if defined(HEAPTYPE_TYPE_AWARE) && HEAPTYPE_TYPE_AWARE
// The type-aware mode: `new T[n]` arrives typed already; a label renames the block
// (it starts at the array cookie, if T has one).
template <class T>
inline T* New_(std::size_t n) {
  return new T[n];
}

template <class T, class Label>
inline T* New_(std::size_t n) {
  T* p = new T[n];
  std::size_t cookie = detail::array_kind<T> == 2 ? (alignof(T) > sizeof(std::size_t) ? alignof(T) : sizeof(std::size_t)) : 0;
  if (p) heaptype_tag_block(reinterpret_cast<const char*>(p) - cookie, tag_of<labeled<T, Label> >(), sizeof(T), n);
  return p;
}
#else
template <class T>
inline T* New_(std::size_t n) {
  T* p = new T[n];
  detail::report_new(p, tag_of<T>(), sizeof(T), alignof(T));
  return p;
}

template <class T, class Label>
inline T* New_(std::size_t n) {
  T* p = new T[n];
  detail::report_new(p, tag_of<labeled<T, Label> >(), sizeof(T), alignof(T));
  return p;
}
#endif

}  // namespace heaptype

#endif
