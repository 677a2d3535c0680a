// patterns.hpp: the one glob dialect of HeapType, shared by report filters and
// budget files. `*` matches any run of characters, `?` exactly one; every other
// character (brackets included: type names hold them, `Token[]`,
// `int [MEM_TYPE_IMGBUF]`) stands for itself. A pattern without `*` or `?`
// matches the name it spells.
#ifndef HEAPTYPE_CORE_PATTERNS_HPP
#define HEAPTYPE_CORE_PATTERNS_HPP

#include <string>
#include <vector>

namespace heaptype {
namespace core {

bool is_glob(const std::string& pattern);
bool glob_match(const std::string& pattern, const std::string& name);
// True when any pattern matches; an empty list matches everything.
bool any_match(const std::vector<std::string>& patterns, const std::string& name);

}  // namespace core
}  // namespace heaptype

#endif
