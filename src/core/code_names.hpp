// code_names.hpp: what the analysis needs to know about the profiled program's
// code and types, behind one interface: the symbolizer (ELF + DWARF of the
// modules on disk) answers for real profiles, a table answers for synthetic ones.
#ifndef HEAPTYPE_CORE_CODE_NAMES_HPP
#define HEAPTYPE_CORE_CODE_NAMES_HPP

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "symbolize/location.hpp"
#include "symbolize/symbolizer.hpp"

namespace heaptype {
namespace core {

// What a code address is (function, inlined frames innermost first, source lines),
// as the symbolizer describes it.
using CodeFrame = symbolize::Frame;
using CodeInfo = symbolize::Location;

class CodeNames {
 public:
  virtual ~CodeNames() = default;
  // An entry address, as the instrumentation hooks record them.
  virtual const CodeInfo& function(uint64_t entry) = 0;
  // A return address (looked up inside the call instruction before it).
  virtual const CodeInfo& call_site(uint64_t return_address) = 0;
  // The C++ type a type tag stands for; "" when unknown. The reference stays valid
  // as long as this object.
  virtual const std::string& type_name(uint64_t tag) = 0;
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
  const std::string& type_name(uint64_t tag) override {
    static const std::string kUnknown;
    auto it = types.find(tag);
    return it == types.end() ? kUnknown : it->second;
  }

 private:
  const CodeInfo& lookup(std::unordered_map<uint64_t, CodeInfo>& table, uint64_t address);
};

// Names from the symbolizer: the binaries on disk (ELF, DWARF, map files), cached
// per build id.
class SymbolizerCodeNames : public CodeNames {
 public:
  explicit SymbolizerCodeNames(symbolize::Symbolizer* symbolizer) : symbolizer_(symbolizer) {}
  const CodeInfo& function(uint64_t entry) override { return symbolizer_->function_at(entry); }
  const CodeInfo& call_site(uint64_t return_address) override { return symbolizer_->call_site(return_address); }
  const std::string& type_name(uint64_t tag) override { return symbolizer_->type_name(tag); }

 private:
  symbolize::Symbolizer* symbolizer_;
};

}  // namespace core
}  // namespace heaptype

#endif
