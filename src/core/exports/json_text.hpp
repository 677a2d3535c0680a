// json_text.hpp: JSON string literals from arbitrary bytes (names read from a
// profile may hold quotes, control characters or invalid UTF-8).
#ifndef HEAPTYPE_CORE_EXPORTS_JSON_TEXT_HPP
#define HEAPTYPE_CORE_EXPORTS_JSON_TEXT_HPP

#include <string>

namespace heaptype {
namespace core {

// Appends `text` as a quoted JSON string; invalid UTF-8 becomes U+FFFD.
void append_json_string(std::string* out, const std::string& text);

}  // namespace core
}  // namespace heaptype

#endif
