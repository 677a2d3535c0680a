#include "cxx_names.hpp"

namespace heaptype {
namespace core {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

// Whether text[0, end) ends with the whole word `operator`.
bool ends_with_operator_keyword(const std::string& text, size_t end) {
  static const std::string kOperator = "operator";
  if (end < kOperator.size() || text.compare(end - kOperator.size(), kOperator.size(), kOperator) != 0) return false;
  size_t start = end - kOperator.size();
  return start == 0 || text[start - 1] == ':' || text[start - 1] == ' ';
}

}  // namespace

std::string collapse_closing_brackets(std::string name) {
  for (size_t at = name.find("> >"); at != std::string::npos; at = name.find("> >", at)) name.erase(at + 1, 1);
  return name;
}

std::string strip_parameters(const std::string& function) {
  std::string text = trim(function);
  size_t clone = text.rfind(" [clone ");
  if (clone != std::string::npos && ends_with(text, "]")) text.resize(clone);
  static const char* const kQualifiers[] = {" const", " volatile", " &&", " &", " noexcept"};
  for (bool changed = true; changed;) {
    changed = false;
    for (const char* qualifier : kQualifiers) {
      if (ends_with(text, qualifier)) {
        text.resize(text.size() - std::string(qualifier).size());
        changed = true;
      }
    }
  }
  if (ends_with(text, ")")) {
    int depth = 0;
    for (size_t i = text.size(); i-- > 0;) {
      if (text[i] == ')') {
        ++depth;
      } else if (text[i] == '(' && --depth == 0) {
        text.resize(i);
        break;
      }
    }
  }
  // A return type ends at the last top-level space before the name: not a space after
  // the keyword `operator` ("operator new", "Foo::operator unsigned long").
  int depth = 0;
  size_t cut = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '<' || c == '(') {
      ++depth;
    } else if (c == '>' || c == ')') {
      --depth;
    } else if (c == ' ' && depth == 0) {
      if (ends_with_operator_keyword(text, i)) break;
      cut = i + 1;
    }
  }
  return text.substr(cut);
}

std::vector<NameComponent> name_components(const std::string& qualified) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t begin = 0;
  for (size_t i = 0; i < qualified.size(); ++i) {
    char c = qualified[i];
    if (c == '<' || c == '(') {
      ++depth;
    } else if (c == '>' || c == ')') {
      --depth;
    } else if (c == ':' && depth == 0 && i + 1 < qualified.size() && qualified[i + 1] == ':') {
      parts.push_back(qualified.substr(begin, i - begin));
      begin = i + 2;
      ++i;
    }
  }
  parts.push_back(qualified.substr(begin));
  std::vector<NameComponent> out;
  for (const std::string& part : parts) {
    NameComponent component;
    size_t open = part.find('<');
    if (open != std::string::npos && ends_with(part, ">")) {
      component.name = part.substr(0, open);
      component.args = part.substr(open + 1, part.size() - open - 2);
      component.has_args = true;
    } else {
      component.name = part;
    }
    out.push_back(component);
  }
  return out;
}

std::optional<std::vector<std::string>> split_template_arguments(const std::string& args) {
  std::vector<std::string> parts;
  int depth = 0, parens = 0;
  size_t begin = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    char c = args[i];
    if (c == '(') {
      ++parens;
    } else if (c == ')') {
      --parens;
    } else if (parens) {
      continue;
    } else if (c == '<') {
      ++depth;
    } else if (c == '>') {
      if (--depth < 0) return std::nullopt;
    } else if (c == ',' && depth == 0) {
      parts.push_back(trim(args.substr(begin, i - begin)));
      begin = i + 1;
    }
  }
  if (depth || parens) return std::nullopt;
  parts.push_back(trim(args.substr(begin)));
  return parts;
}

}  // namespace core
}  // namespace heaptype
