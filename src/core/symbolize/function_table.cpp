#include "function_table.hpp"

#include <algorithm>
#include <cstring>
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

bool ends_with(const char* text, size_t size, const char* suffix) {
  size_t n = std::strlen(suffix);
  return size >= n && std::memcmp(text + size - n, suffix, n) == 0;
}

}  // namespace

std::string coroutine_of_clone(const char* clone) {
  size_t size = std::strlen(clone);
  static const char kGccClone[] = ".Frame.actor", kClangClone[] = ".resume";
  if (ends_with(clone, size, kClangClone)) {
    std::string ramp(clone, size - (sizeof kClangClone - 1));
    return ramp.compare(0, 2, "_Z") == 0 && ramp.find('.') == std::string::npos ? ramp : "";
  }
  if (!ends_with(clone, size, kGccClone)) return "";
  // "..._Z7counterPZ7counteriE17_Z7counteri.Frame.actor": the frame type's name is a
  // <length><identifier> whose identifier is "<ramp>.Frame".
  size_t end = size - (sizeof ".actor" - 1);  // after ".Frame"
  for (size_t start = end; start-- > 0;) {
    size_t digits = start;
    uint64_t length = 0, scale = 1;
    while (digits > 0 && clone[digits - 1] >= '0' && clone[digits - 1] <= '9' && scale <= 1000000) {
      length += static_cast<uint64_t>(clone[digits - 1] - '0') * scale;
      scale *= 10;
      --digits;
      if (length == end - start && clone[start] == '_' && clone[start + 1] == 'Z')
        return std::string(clone + start, end - start - (sizeof ".Frame" - 1));
    }
  }
  return "";
}

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
    std::string ramp = coroutine_of_clone(c.name);
    if (!ramp.empty()) coroutine_ramps_.insert(std::move(ramp));
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
