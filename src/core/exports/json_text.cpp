#include "json_text.hpp"

#include <cstdint>
#include <cstdio>

namespace heaptype {
namespace core {
namespace {

// Length of the valid UTF-8 sequence at text[i], 0 when invalid.
size_t utf8_sequence(const std::string& text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  uint8_t b = byte(i);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
  if (n == 2 && b < 0xc2) return 0;                      // overlong
  if (n == 3 && b == 0xe0 && byte(i + 1) < 0xa0) return 0;
  if (n == 3 && b == 0xed && byte(i + 1) >= 0xa0) return 0;  // surrogates
  if (n == 4 && (b > 0xf4 || (b == 0xf0 && byte(i + 1) < 0x90) || (b == 0xf4 && byte(i + 1) >= 0x90))) return 0;
  return n;
}

}  // namespace

void append_json_string(std::string* out, const std::string& text) {
  out->push_back('"');
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': *out += "\\\""; break;
        case '\\': *out += "\\\\"; break;
        case '\n': *out += "\\n"; break;
        case '\r': *out += "\\r"; break;
        case '\t': *out += "\\t"; break;
        default:
          if (c < 0x20 || c == 0x7f) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\u%04x", c);
            *out += buf;
          } else if (c == '<' || c == '>' || c == '&') {
            // Safe inside an HTML <script> block as well.
            char buf[8];
            snprintf(buf, sizeof buf, "\\u%04x", c);
            *out += buf;
          } else {
            out->push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    size_t n = utf8_sequence(text, i);
    if (n == 0) {
      *out += "\\ufffd";
      ++i;
    } else {
      out->append(text, i, n);
      i += n;
    }
  }
  out->push_back('"');
}

}  // namespace core
}  // namespace heaptype
