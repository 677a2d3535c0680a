// code_names.hpp: what the analysis needs to know about the profiled program's
// code and types, behind one interface: the symbolizer (ELF + DWARF of the
// modules on disk) answers for real profiles, a table answers for synthetic ones.
#ifndef HEAPTYPE_CORE_CODE_NAMES_HPP
#define HEAPTYPE_CORE_CODE_NAMES_HPP

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace heaptype {
namespace core {

// One function at a code address: the function itself, or one inlined into it.
struct CodeFrame {
  std::string function;
  std::string file;
  uint32_t line = 0;
  bool inlined = false;             // inlined into the next frame outward
  uint64_t type_argument_size = 0;  // sizeof its first template type argument, 0 unknown
};

// What a code address is.
struct CodeInfo {
  uint64_t address = 0;
  std::string module;               // "" unknown
  uint64_t module_offset = 0;       // link-time address in the module
  std::string function;             // the out-of-line function holding it, "" unknown
  uint64_t function_address = 0;    // its runtime entry, 0 unknown
  std::vector<CodeFrame> frames;    // innermost first; empty without debug info

  // The function's name, else "module+0xoffset", else "0xaddress".
  std::string name() const;
};

class CodeNames {
 public:
  virtual ~CodeNames() = default;
  // An entry address, as the instrumentation hooks record them.
  virtual const CodeInfo& function(uint64_t entry) = 0;
  // A return address (looked up inside the call instruction before it).
  virtual const CodeInfo& call_site(uint64_t return_address) = 0;
  // The C++ type a type tag stands for; "" when unknown.
  virtual std::string type_name(uint64_t tag) = 0;
};

// Names given as tables (synthetic profiles, tests). Unknown addresses get
// "0x..." names, unknown tags "".
class TableCodeNames : public CodeNames {
 public:
  std::unordered_map<uint64_t, CodeInfo> functions;
  std::unordered_map<uint64_t, CodeInfo> call_sites;
  std::unordered_map<uint64_t, std::string> types;

  const CodeInfo& function(uint64_t entry) override { return lookup(functions, entry); }
  const CodeInfo& call_site(uint64_t return_address) override { return lookup(call_sites, return_address); }
  std::string type_name(uint64_t tag) override {
    auto it = types.find(tag);
    return it == types.end() ? std::string() : it->second;
  }

 private:
  const CodeInfo& lookup(std::unordered_map<uint64_t, CodeInfo>& table, uint64_t address);
};

}  // namespace core
}  // namespace heaptype

#endif
