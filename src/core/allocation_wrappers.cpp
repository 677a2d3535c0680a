#include "allocation_wrappers.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace heaptype {
namespace core {
namespace {

// Sorted (std::binary_search).
const char* const kWrappers[] = {
    "g_malloc",          "g_malloc0",         "g_malloc0_n",       "g_malloc_n",        "g_memdup",
    "g_memdup2",         "g_realloc",         "g_realloc_n",       "g_strdup",          "g_strndup",
    "g_try_malloc",      "g_try_malloc0",     "g_try_realloc",     "llvm::allocate_buffer",
    "llvm::safe_calloc", "llvm::safe_malloc", "llvm::safe_realloc", "operator new",     "operator new[]",
    "x2nrealloc",        "x2realloc",         "xcalloc",           "xmalloc",           "xmemdup",
    "xnmalloc",          "xnrealloc",         "xrealloc",          "xreallocarray",     "xstrdup",
    "xstrndup",          "xzalloc",
};

bool before(const char* a, const char* b) { return std::strcmp(a, b) < 0; }

}  // namespace

bool is_allocation_wrapper(const std::string& function) {
  return std::binary_search(std::begin(kWrappers), std::end(kWrappers), function.c_str(), before);
}

}  // namespace core
}  // namespace heaptype
