#include "function_table.hpp"

#include <algorithm>
#include <tuple>

namespace heaptype {
namespace symbolize {
namespace {

struct Candidate {
  uint64_t start, size;
  const char* name;
  std::tuple<int, int, int> rank;  // smaller wins
};

int binding_rank(unsigned char info) {
  switch (GELF_ST_BIND(info)) {
    case STB_GLOBAL: return 0;
    case STB_WEAK: return 1;
    default: return 2;
  }
}

bool is_defined_function(const GElf_Sym& sym) {
  int kind = GELF_ST_TYPE(sym.st_info);
  return (kind == STT_FUNC || kind == STT_GNU_IFUNC) && sym.st_shndx != SHN_UNDEF && sym.st_value != 0;
}

}  // namespace

FunctionTable::FunctionTable(const ElfFile& file) {
  std::vector<Candidate> all;
  const Elf64_Word tables[] = {SHT_SYMTAB, SHT_DYNSYM};
  for (int table = 0; table < 2; ++table) {
    file.for_each_symbol(tables[table], [&](const GElf_Sym& sym, const char* name) {
      if (!is_defined_function(sym)) return;
      all.push_back(Candidate{sym.st_value, sym.st_size, name,
                              std::make_tuple(binding_rank(sym.st_info), sym.st_size ? 0 : 1, table)});
    });
  }
  // By address, the best-ranked first; then keep the first of each address.
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    return a.start != b.start ? a.start < b.start : a.rank < b.rank;
  });
  for (const Candidate& c : all) {
    if (!starts_.empty() && starts_.back() == c.start) continue;
    starts_.push_back(c.start);
    sizes_.push_back(c.size);
    names_.push_back(c.name);
  }
}

FunctionTable::Symbol FunctionTable::find(uint64_t pc) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), pc);
  if (it == starts_.begin()) return {};
  size_t index = static_cast<size_t>(it - starts_.begin()) - 1;
  if (pc >= starts_[index] + std::max<uint64_t>(sizes_[index], 1)) return {};
  return Symbol{starts_[index], names_[index]};
}

}  // namespace symbolize
}  // namespace heaptype
