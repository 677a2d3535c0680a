#include "type_inference.hpp"

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cxx_names.hpp"

namespace heaptype {
namespace core {
namespace {

const std::unordered_set<std::string>& allocators() {
  static const std::unordered_set<std::string> names = {"std::__new_allocator", "__gnu_cxx::new_allocator",
                                                        "std::allocator", "__gnu_cxx::__pool_alloc",
                                                        "__gnu_cxx::malloc_allocator"};
  return names;
}

const std::unordered_set<std::string>& factories() {
  static const std::unordered_set<std::string> names = {"std::make_unique", "std::make_unique_for_overwrite",
                                                        "std::make_shared", "std::allocate_shared",
                                                        "std::make_shared_for_overwrite"};
  return names;
}

const std::unordered_set<std::string>& strings() {
  static const std::unordered_set<std::string> names = {"std::__cxx11::basic_string", "std::basic_string"};
  return names;
}

uint64_t character_size(const std::string& name) {
  static const std::unordered_map<std::string, uint64_t> sizes = {
      {"char", 1}, {"signed char", 1}, {"unsigned char", 1}, {"char8_t", 1},
      {"char16_t", 2}, {"char32_t", 4}, {"wchar_t", 4}};
  auto it = sizes.find(name);
  return it == sizes.end() ? 0 : it->second;
}

std::string joined(const std::vector<NameComponent>& components, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    if (i) out += "::";
    out += components[i].name;
  }
  return out;
}

// The first template argument, without a trailing "[]".
std::string first_argument(const NameComponent& component) {
  if (!component.has_args || component.args.empty()) return "";
  std::optional<std::vector<std::string>> args = split_template_arguments(component.args);
  if (!args || args->empty() || (*args)[0].empty()) return "";
  std::string first = (*args)[0];
  for (const char* array : {" []", "[]"}) {
    std::string suffix(array);
    if (first.size() > suffix.size() && first.compare(first.size() - suffix.size(), suffix.size(), suffix) == 0) {
      first.resize(first.size() - suffix.size());
      while (!first.empty() && first.back() == ' ') first.pop_back();
    }
  }
  return collapse_closing_brackets(first);
}

}  // namespace

bool type_from_function(const std::string& function, std::string* type, bool* own_argument) {
  std::vector<NameComponent> comps = name_components(strip_parameters(function));
  if (comps.size() < 2) return false;
  size_t n = comps.size();
  if (comps[n - 1].name == "allocate" && n >= 3) {
    std::string scope = joined(comps, n - 1);
    if (allocators().count(scope)) {
      *type = first_argument(comps[n - 2]);
      *own_argument = true;
      return !type->empty();
    }
    if (scope == "std::allocator_traits") {
      std::string allocator = first_argument(comps[n - 2]);  // std::allocator<T>
      if (!allocator.empty()) {
        std::vector<NameComponent> inner = name_components(allocator);
        if (allocators().count(joined(inner, inner.size()))) {
          *type = first_argument(inner.back());
          *own_argument = false;
          return !type->empty();
        }
      }
    }
  }
  if (factories().count(joined(comps, n))) {
    *type = first_argument(comps[n - 1]);
    *own_argument = true;
    return !type->empty();
  }
  for (size_t i = 1; i + 1 < n; ++i) {
    if (strings().count(joined(comps, i + 1))) {
      *type = first_argument(comps[i]);
      *own_argument = false;
      return !type->empty();
    }
  }
  return false;
}

InferredType infer_type(const CodeInfo& call_site) {
  InferredType out;
  std::vector<CodeFrame> fallback;
  const std::vector<CodeFrame>* frames = &call_site.frames;
  if (frames->empty() && !call_site.function.empty()) {
    fallback.push_back(CodeFrame{call_site.function, "", 0, false, 0});
    frames = &fallback;
  }
  for (const CodeFrame& frame : *frames) {
    bool own_argument = false;
    if (!type_from_function(frame.function, &out.name, &own_argument)) continue;
    out.size = own_argument ? frame.type_argument_size : 0;
    if (!out.size) out.size = character_size(out.name);
    return out;
  }
  out.name.clear();
  return out;
}

uint64_t InferredType::objects(uint64_t count, uint64_t bytes) const {
  if (size && bytes % size == 0 && bytes >= size * count) return bytes / size;
  return count;
}

}  // namespace core
}  // namespace heaptype
