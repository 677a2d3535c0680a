// module_names.hpp: what the runtime asks of a loaded object's path: its file name,
// and whether that names a library (libc.so.6, libstdc++.so.6, ...).
#ifndef HEAPTYPE_RUNTIME_MODULE_NAMES_HPP
#define HEAPTYPE_RUNTIME_MODULE_NAMES_HPP

#include <cstring>

namespace heaptype {
namespace runtime {

// The part of `path` after its last '/'.
inline const char* file_name_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// Whether the file name of `path` starts with `prefix`.
inline bool file_name_starts_with(const char* path, const char* prefix) {
  return std::strncmp(file_name_of(path), prefix, std::strlen(prefix)) == 0;
}

}  // namespace runtime
}  // namespace heaptype

#endif
