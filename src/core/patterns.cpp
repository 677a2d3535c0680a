#include "patterns.hpp"

namespace heaptype {
namespace core {

bool is_glob(const std::string& pattern) { return pattern.find_first_of("*?") != std::string::npos; }

// Iterative matching with one backtracking point (the last `*`): linear in
// practice, no recursion whatever the pattern.
bool glob_match(const std::string& pattern, const std::string& name) {
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || (pattern[p] != '*' && pattern[p] == name[n]))) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool any_match(const std::vector<std::string>& patterns, const std::string& name) {
  if (patterns.empty()) return true;
  for (const std::string& pattern : patterns)
    if (glob_match(pattern, name)) return true;
  return false;
}

}  // namespace core
}  // namespace heaptype
