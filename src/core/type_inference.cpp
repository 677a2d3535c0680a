#include "type_inference.hpp"

#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cxx_names.hpp"

namespace heaptype {
namespace core {
namespace {

// A name without its ABI tags: "__libcpp_allocate[abi:nie220108]" -> "__libcpp_allocate".
std::string without_abi_tags(const std::string& name) {
  size_t tag = name.find("[abi:");
  return tag == std::string::npos ? name : name.substr(0, tag);
}

const std::unordered_set<std::string>& allocators() {
  static const std::unordered_set<std::string> names = {"std::__new_allocator", "__gnu_cxx::new_allocator",
                                                        "std::allocator", "__gnu_cxx::__pool_alloc",
                                                        "__gnu_cxx::malloc_allocator"};
  return names;
}

const std::unordered_set<std::string>& factories() {
  static const std::unordered_set<std::string> names = {"std::make_unique", "std::make_unique_for_overwrite",
                                                        "std::make_shared", "std::allocate_shared",
                                                        "std::make_shared_for_overwrite", "std::get_temporary_buffer",
                                                        // libstdc++'s valarray<T> storage: operator new(n * sizeof(T))
                                                        "std::__valarray_get_storage",
                                                        // libc++'s std::allocator<T>::allocate, inside libc++.a
                                                        "std::__1::__libcpp_allocate", "std::__libcpp_allocate"};
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
  auto it = sizes.find(name.substr(0, name.find("[] of ")));
  return it == sizes.end() ? 0 : it->second;
}

// The string of `character`s as the typed headers name it: "std::string".
std::string string_name(const std::string& character) {
  static const std::unordered_map<std::string, std::string> strings = {
      {"char", "std::string"}, {"wchar_t", "std::wstring"}, {"char8_t", "std::u8string"},
      {"char16_t", "std::u16string"}, {"char32_t", "std::u32string"}};
  auto it = strings.find(character);
  return it == strings.end() ? "std::basic_string<" + character + ">" : it->second;
}

// A string's characters, named as the typed headers name them (heaptype::elements_of
// renders so): "char[] of std::string".
std::string string_buffer(const std::string& character) { return character + "[] of " + string_name(character); }

// A qualified name without template arguments and without the standard libraries'
// inline namespaces: "std::__1::locale::__imp::__imp" -> "std::locale::__imp::__imp".
std::string plain_name(const std::vector<NameComponent>& components) {
  std::string out;
  for (const NameComponent& c : components) {
    if (c.name == "__cxx11" || c.name == "__1") continue;
    if (!out.empty()) out += "::";
    out += without_abi_tags(c.name);
  }
  return out;
}

// Untyped blocks the C and C++ runtimes allocate, for themselves or on the program's
// behalf, in code built without HeapType, by the function that allocates them: a row
// that names the library and what the block is for. `function` is a plain_name; one
// ending in "::" stands for every member of that class. "{lib}" becomes libstdc++ or
// libc++ (by the name's inline namespace).
struct LibraryRow {
  const char* function;
  const char* row;
};

const LibraryRow kLibraryRows[] = {
    {"_IO_file_doallocate", "glibc: stdio buffer"},
    {"__fopen_internal", "glibc: FILE of fopen"},
    {"_dl_allocate_tls", "glibc: thread-local storage"},
    {"allocate_dtv", "glibc: thread-local storage"},
    {"_dl_resize_dtv", "glibc: thread-local storage"},
    {"__duplocale", "glibc: locale"},
    {"newlocale", "glibc: locale"},
    {"__new_exitfn", "glibc: exit handler list"},  // atexit, __cxa_atexit: a static object's destructor
    {"__cxa_allocate_exception", "C++ runtime: exception object"},
    {"__cxa_allocate_dependent_exception", "C++ runtime: exception object"},
    {"__cxxabiv1::__aligned_malloc_with_fallback", "C++ runtime: exception object"},
    {"std::basic_filebuf::", "{lib}: std::basic_filebuf buffer"},
    {"std::basic_stringbuf::", "{lib}: std::basic_stringbuf buffer"},
    {"std::collate::", "{lib}: std::collate::transform buffer"},
    {"std::locale::", "{lib}: std::locale"},
    {"std::locale::_Impl::", "{lib}: std::locale"},
    {"std::locale::__imp::", "{lib}: std::locale"},
    {"std::numpunct::", "{lib}: std::locale"},
    {"std::__numpunct_cache::", "{lib}: std::locale"},
    {"std::__moneypunct_cache::", "{lib}: std::locale"},
    {"std::moneypunct::", "{lib}: std::locale"},
    {"std::__timepunct::", "{lib}: std::locale"},
    {"std::thread::", "{lib}: std::thread state"},
    {"std::__thread_struct::", "{lib}: std::thread state"},
    // std::filesystem's out-of-line members (libstdc++'s fs_path.cc, fs_dir.cc): a path's
    // list of components, a directory iterator's state.
    {"std::filesystem::path::", "{lib}: std::filesystem::path"},
    {"std::filesystem::path::_List::", "{lib}: std::filesystem::path"},
    {"std::filesystem::directory_iterator::", "{lib}: std::filesystem::directory_iterator"},
    {"std::filesystem::recursive_directory_iterator::", "{lib}: std::filesystem::directory_iterator"},
};

bool library_row(const std::string& function, std::string* row) {
  std::vector<NameComponent> comps = name_components(strip_parameters(function));
  if (comps.empty()) return false;
  std::string name = plain_name(comps);
  std::string scope = name.substr(0, name.rfind("::") == std::string::npos ? 0 : name.rfind("::") + 2);
  for (const LibraryRow& entry : kLibraryRows) {
    std::string pattern = entry.function;
    bool member = pattern.size() > 2 && pattern.compare(pattern.size() - 2, 2, "::") == 0;
    if (member ? scope != pattern : name != pattern) continue;
    *row = entry.row;
    size_t lib = row->find("{lib}");
    if (lib != std::string::npos)
      row->replace(lib, 5, function.find("std::__1::") != std::string::npos ? "libc++" : "libstdc++");
    return true;
  }
  return false;
}

const char kWithoutSymbol[] = ": function without a symbol";
const std::string kLibstdcxxWithoutSymbol = std::string("libstdc++") + kWithoutSymbol;

// A call site in one of these modules without a symbol for it (a stripped library).
std::string library_of_module(const std::string& module) {
  std::string base = module.substr(module.rfind('/') + 1);
  if (base.compare(0, 12, "libstdc++.so") == 0) return "libstdc++";
  if (base.compare(0, 7, "libc.so") == 0 || base.compare(0, 8, "ld-linux") == 0) return "glibc";
  return "";
}

std::string joined(const std::vector<NameComponent>& components, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    if (i) out += "::";
    out += without_abi_tags(components[i].name);
  }
  return out;
}

// sizeof(basic_string<C>::_Rep_base) on x86-64: length and capacity (8 B each), the
// reference count (an int, padded to 8).
constexpr uint64_t kCopyOnWriteRepBytes = 24;

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

// libstdc++'s copy-on-write string (the old ABI, _GLIBCXX_USE_CXX11_ABI=0, and the
// message of a std::runtime_error in either ABI) allocates one block for a `_Rep`
// (length, capacity, reference count) and the characters after it, in
// `basic_string<C>::_Rep::_S_create`: its row is the characters', as in the new ABI
// ("char[] of std::string"), counted without the _Rep. The demangler abbreviates the
// old ABI's basic_string<char> as "std::string" (the new ABI's is
// std::__cxx11::basic_string): any member of it that allocates inlined _S_create.
// The character type, or "".
std::string copy_on_write_character(const std::vector<NameComponent>& comps) {
  size_t n = comps.size();
  if (n >= 3 && comps[0].name == "std" && comps[1].name == "string" && !comps[1].has_args) return "char";
  for (size_t r = 2; r + 1 < n; ++r)
    if (comps[r].name == "_Rep" && joined(comps, r) == "std::basic_string") return first_argument(comps[r - 1]);
  return "";
}

// std::promise<R>'s constructor allocates its result itself and its shared state in
// the std::make_shared it inlines: at a call site named by the function alone (no
// inlined frames), a block of either may be the other's.
bool allocates_other_types_inline(const std::vector<NameComponent>& comps) {
  return comps.size() >= 3 && joined(comps, comps.size()) == "std::promise::promise";
}

// type_from_function, of the function's name components.
bool type_from_components(const std::vector<NameComponent>& comps, std::string* type, bool* own_argument) {
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
  // shared_ptr<T>(T* p)'s control block (libstdc++): __shared_count<Lp>::__shared_count<P>(P).
  if (n >= 3 && joined(comps, n) == "std::__shared_count::__shared_count" && comps[n - 1].has_args) {
    std::string pointer = first_argument(comps[n - 1]), policy = first_argument(comps[n - 2]);
    if (pointer.empty() || policy.empty()) return false;
    *type = "std::_Sp_counted_ptr<" + pointer + ", " + policy + ">";
    *own_argument = false;
    return true;
  }
  // std::function's heap-held callable (libstdc++): _Base_manager<F>::_M_create / _M_init_functor.
  if (n >= 4 && joined(comps, n - 1) == "std::_Function_base::_Base_manager" &&
      (comps[n - 1].name == "_M_create" || comps[n - 1].name == "_M_init_functor")) {
    *type = first_argument(comps[n - 2]);
    *own_argument = false;
    return !type->empty();
  }
  // std::any's value held on the heap (libstdc++: _Manager_external<T>::_S_create, whose
  // `new _Tp` is in <any>, read before the `new` macro).
  if (n >= 4 && joined(comps, n - 1) == "std::any::_Manager_external" && comps[n - 1].name == "_S_create") {
    *type = first_argument(comps[n - 2]);
    *own_argument = false;
    return !type->empty();
  }
  // std::promise<R>'s result (libstdc++: `new _Res_type()` in its constructor, in
  // <future>, read before the `new` macro) and a task's (_S_allocate_result<R>).
  if (n >= 3 && ((joined(comps, n) == "std::promise::promise" && comps[n - 2].has_args) ||
                 (joined(comps, n) == "std::__future_base::_S_allocate_result" && comps[n - 1].has_args))) {
    std::string result = first_argument(comps[n - 1].has_args ? comps[n - 1] : comps[n - 2]);
    *type = "std::__future_base::_Result<" + result + ">";
    *own_argument = false;
    return !result.empty();
  }
  std::string cow_character = copy_on_write_character(comps);
  if (!cow_character.empty()) {
    *type = string_buffer(cow_character);
    *own_argument = false;
    return true;
  }
  if (factories().count(joined(comps, n))) {
    *type = first_argument(comps[n - 1]);
    *own_argument = true;
    return !type->empty();
  }
  for (size_t i = 1; i + 1 < n; ++i) {
    if (strings().count(joined(comps, i + 1))) {
      std::string character = first_argument(comps[i]);
      *own_argument = false;
      if (character.empty()) return false;
      *type = string_buffer(character);
      return true;
    }
  }
  return false;
}

// The namespace of a hash table library's internals, given as its first `count`
// components: the library's public prefix, or nullptr. abseil's sits in a versioned
// inline namespace (absl::lts_20240722::container_internal, Debian's
// absl::debian3::container_internal), whatever its name.
const char* container_library(const std::vector<NameComponent>& components, size_t count) {
  auto is = [&](size_t i, const char* name) { return components[i].name == name && !components[i].has_args; };
  if (count == 2 && is(0, "phmap") && is(1, "priv")) return "phmap";
  if (count >= 2 && count <= 3 && is(0, "absl") && is(count - 1, "container_internal")) return "absl";
  return nullptr;
}

// "<what> of <library>::<container><the first `count` of args>": a container's row.
std::string container_row(const char* what, const char* library, const std::string& container,
                          const std::vector<std::string>& args, size_t count) {
  std::string row = std::string(what) + " of " + library + "::" + container + "<";
  for (size_t a = 0; a < count; ++a) row += (a ? ", " : "") + args[a];
  return row + ">";
}

// A Swiss table's backing array, allocated by a member of raw_hash_set<Policy, ...>:
// "table of phmap::flat_hash_map<int, Foo>" from FlatHashMapPolicy<int, Foo>.
StorageFrame hash_table_row(const NameComponent& table, std::string* row) {
  static const std::unordered_map<std::string, std::string> containers = {
      {"FlatHashMapPolicy", "flat_hash_map"}, {"NodeHashMapPolicy", "node_hash_map"},
      {"FlatHashSetPolicy", "flat_hash_set"}, {"NodeHashSetPolicy", "node_hash_set"}};
  std::vector<NameComponent> policy = name_components(first_argument(table));
  if (policy.empty() || !policy.back().has_args) return StorageFrame::kOutside;
  const char* library = container_library(policy, policy.size() - 1);
  auto container = containers.find(policy.back().name);
  std::optional<std::vector<std::string>> args = split_template_arguments(policy.back().args);
  if (!library || container == containers.end() || !args) return StorageFrame::kOutside;
  *row = container_row("table", library, container->second, *args, args->size());
  return StorageFrame::kContainer;
}

// A btree's node, allocated by a member of btree<Params> or btree_node<Params>:
// "node of absl::btree_map<int, Foo>" from map_params<int, Foo, Compare, Alloc,
// TargetNodeSize, IsMulti> (set_params<Key, Compare, Alloc, TargetNodeSize, IsMulti>).
StorageFrame btree_node_row(const NameComponent& tree, std::string* row) {
  std::vector<NameComponent> params = name_components(first_argument(tree));
  if (params.empty() || !params.back().has_args) return StorageFrame::kOutside;
  const char* library = container_library(params, params.size() - 1);
  std::optional<std::vector<std::string>> args = split_template_arguments(params.back().args);
  bool map = params.back().name == "map_params", set = params.back().name == "set_params";
  size_t keys = map ? 2 : 1;
  if (!library || !(map || set) || !args || args->size() != keys + 4) return StorageFrame::kOutside;
  bool multi = args->back() == "true";
  *row = container_row("node", library, std::string("btree_") + (multi ? "multi" : "") + (map ? "map" : "set"),
                       *args, keys);
  return StorageFrame::kContainer;
}

// std::make_unique<T> and make_unique_for_overwrite<T>: `new T`, one object a block
// (their T[] forms make arrays).
bool makes_one_object(const std::vector<NameComponent>& comps, const std::string& type) {
  std::string function = joined(comps, comps.size());
  return (function == "std::make_unique" || function == "std::make_unique_for_overwrite") &&
         type.find('[') == std::string::npos;
}

}  // namespace

bool container_storage(const std::string& type) {
  static const std::string kLocal = ")::M";  // a type local to a function, after its parameters
  std::vector<NameComponent> comps;
  if (type.size() > kLocal.size() && type.compare(type.size() - kLocal.size(), kLocal.size(), kLocal) == 0) {
    comps = name_components(strip_parameters(type.substr(0, type.size() - kLocal.size() + 1)));  // up to the ')'
    return !comps.empty() && comps.back().name == "Allocate" && comps.back().has_args &&
           container_library(comps, comps.size() - 1);
  }
  comps = name_components(type);
  const char* library = comps.empty() ? nullptr : container_library(comps, comps.size() - 1);
  return library && std::strcmp(library, "absl") == 0 && comps.back().name == "AlignedType" && comps.back().has_args;
}

StorageFrame container_frame(const std::string& function, std::string* row) {
  std::vector<NameComponent> comps = name_components(strip_parameters(function));
  if (comps.empty()) return StorageFrame::kOutside;
  std::string plain = plain_name(comps);
  // The allocation's machinery: operator new, allocators and their traits (the standard
  // library's, phmap::allocator_traits, a custom allocator the container was given).
  if (plain.find("operator new") != std::string::npos || plain.find("allocat") != std::string::npos)
    return StorageFrame::kInside;
  size_t library_end = 0;  // the components of the library's internal namespace
  while (library_end < comps.size() && !container_library(comps, library_end)) ++library_end;
  if (library_end == comps.size()) return StorageFrame::kOutside;
  for (size_t i = library_end; i < comps.size(); ++i) {
    if (comps[i].name == "raw_hash_set") return hash_table_row(comps[i], row);
    if (comps[i].name == "btree" || comps[i].name == "btree_node") return btree_node_row(comps[i], row);
    if (comps[i].name.compare(0, 5, "btree") == 0) return StorageFrame::kOutside;
  }
  return StorageFrame::kInside;
}

bool type_from_function(const std::string& function, std::string* type, bool* own_argument) {
  return type_from_components(name_components(strip_parameters(function)), type, own_argument);
}

InferredType infer_type(const CodeInfo& call_site) {
  InferredType out;
  std::vector<CodeFrame> fallback;
  const std::vector<CodeFrame>* frames = &call_site.frames;
  if (frames->empty() && !call_site.function.empty()) {
    fallback.push_back(CodeFrame{call_site.function, "", 0, false, 0});
    frames = &fallback;
  }
  if (call_site.coroutine && !frames->empty()) {
    size_t ramp = 0;  // past the promise type's operator new
    while (ramp + 1 < frames->size() && (*frames)[ramp].function.find("::operator new(") != std::string::npos) ++ramp;
    out.name = "coroutine frame of " + (*frames)[ramp].function;
    out.library = true;
    return out;
  }
  // Without debug info the call site is its function alone (the symbolizer's one frame
  // without a line), and what that function inlined allocates there too.
  bool inlined_frames_known = !(frames->size() == 1 && frames->front().file.empty() && frames->front().line == 0);
  for (const CodeFrame& frame : *frames) {
    bool own_argument = false;
    std::vector<NameComponent> comps = name_components(strip_parameters(frame.function));
    if (type_from_components(comps, &out.name, &own_argument)) {
      if (!inlined_frames_known && allocates_other_types_inline(comps)) break;
      out.size = own_argument ? frame.type_argument_size : 0;
      if (!out.size) out.size = character_size(out.name);
      if (!copy_on_write_character(comps).empty()) out.header = kCopyOnWriteRepBytes;
      out.container_storage = container_storage(out.name);
      out.one_object = makes_one_object(comps, out.name);
      return out;
    }
    if (library_row(frame.function, &out.name)) {
      out.library = true;
      return out;
    }
  }
  out.name.clear();
  std::string library = frames->empty() ? library_of_module(call_site.module) : "";
  if (!library.empty()) {
    out.name = library + kWithoutSymbol;
    out.library = true;
    out.unnamed_function = true;
  }
  return out;
}

std::string unnamed_function_row(const std::string& library_row_name, const std::string& caller) {
  std::string row;
  if (library_row(caller, &row)) return row;
  std::vector<NameComponent> comps = name_components(strip_parameters(caller));
  if (comps.empty()) return library_row_name;
  return library_row_name.substr(0, library_row_name.find(':')) + ": " + plain_name(comps);
}

const std::string& InferredType::row(uint64_t bytes) const {
  static const std::string pool = "libstdc++: emergency exception pool";
  constexpr uint64_t kGcc12PoolBytes = 64 * 1024 + 64 * 112;
  return library && bytes == kGcc12PoolBytes && name == kLibstdcxxWithoutSymbol ? pool : name;
}

uint64_t InferredType::objects(uint64_t count, uint64_t bytes) const {
  if (header && bytes >= header * count) bytes -= header * count;
  if (size && bytes % size == 0 && bytes >= size * count) return bytes / size;
  return count;
}

}  // namespace core
}  // namespace heaptype
