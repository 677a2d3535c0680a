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

// Names from the symbolizer: the binaries on disk (ELF, DWARF, map files), cached
// per build id. Type names are asked for one tag at a time and kept.
class SymbolizerCodeNames : public CodeNames {
 public:
  explicit SymbolizerCodeNames(symbolize::Symbolizer* symbolizer) : symbolizer_(symbolizer) {}
  const CodeInfo& function(uint64_t entry) override { return symbolizer_->function_at(entry); }
  const CodeInfo& call_site(uint64_t return_address) override { return symbolizer_->call_site(return_address); }
  std::string type_name(uint64_t tag) override;

 private:
  symbolize::Symbolizer* symbolizer_;
  std::unordered_map<uint64_t, std::string> types_;
};

}  // namespace core
}  // namespace heaptype

#endif
