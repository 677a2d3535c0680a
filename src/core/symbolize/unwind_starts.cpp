#include "unwind_starts.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

namespace heaptype {
namespace symbolize {
namespace {

constexpr uint8_t kOmit = 0xff;
constexpr uint8_t kDatarelSdata4 = 0x3b;  // DW_EH_PE_datarel | DW_EH_PE_sdata4

// Reads little-endian values and LEB128 numbers from a byte string; `ok` turns false
// past its end.
struct Reader {
  const std::string& bytes;
  size_t at = 0;
  bool ok = true;

  template <class T>
  T fixed() {
    T value{};
    if (at + sizeof value > bytes.size()) {
      ok = false;
      return value;
    }
    std::memcpy(&value, bytes.data() + at, sizeof value);
    at += sizeof value;
    return value;
  }
  uint64_t uleb() {
    uint64_t value = 0;
    for (unsigned shift = 0; ok; shift += 7) {
      uint8_t byte = fixed<uint8_t>();
      if (shift < 64) value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) break;
    }
    return value;
  }
  int64_t sleb() {
    int64_t value = 0;
    unsigned shift = 0;
    uint8_t byte = 0;
    do {
      byte = fixed<uint8_t>();
      if (shift < 64) value |= static_cast<int64_t>(byte & 0x7f) << shift;
      shift += 7;
    } while (ok && (byte & 0x80));
    if (shift < 64 && (byte & 0x40)) value |= -(int64_t{1} << shift);
    return value;
  }
  // A value of encoding `encoding`'s format, without its application (a range).
  uint64_t value_of(uint8_t encoding) {
    switch (encoding & 0x0f) {
      case 0x00: return fixed<uint64_t>();                        // absptr
      case 0x01: return uleb();                                   // uleb128
      case 0x02: return fixed<uint16_t>();                        // udata2
      case 0x03: return fixed<uint32_t>();                        // udata4
      case 0x04: return fixed<uint64_t>();                        // udata8
      case 0x09: return static_cast<uint64_t>(sleb());
      case 0x0a: return static_cast<uint64_t>(static_cast<int64_t>(fixed<int16_t>()));
      case 0x0b: return static_cast<uint64_t>(static_cast<int64_t>(fixed<int32_t>()));
      case 0x0c: return static_cast<uint64_t>(fixed<int64_t>());
      default: ok = false; return 0;
    }
  }
};

// The pointer encoding ('R' augmentation) of the CIE at link-time address `cie`; kOmit
// when it cannot be read.
uint8_t fde_encoding(const ElfFile& file, uint64_t cie) {
  std::string bytes = file.bytes_at(cie, 256);
  Reader r{bytes};
  uint32_t length = r.fixed<uint32_t>();
  if (!r.ok || length == 0 || length == 0xffffffffu || r.fixed<uint32_t>() != 0) return kOmit;  // CIE id 0
  uint8_t version = r.fixed<uint8_t>();
  size_t end = bytes.find('\0', r.at);
  if (end == std::string::npos) return kOmit;
  std::string augmentation = bytes.substr(r.at, end - r.at);
  r.at = end + 1;
  if (version >= 4) r.at += 2;  // address size, segment selector size
  r.uleb();                     // code alignment
  r.sleb();                     // data alignment
  if (version == 1)
    r.fixed<uint8_t>();
  else
    r.uleb();  // return address register
  if (augmentation.empty() || augmentation[0] != 'z') return 0x00;  // absptr
  r.uleb();  // augmentation data length
  for (size_t i = 1; i < augmentation.size() && r.ok; ++i) {
    switch (augmentation[i]) {
      case 'R': return r.fixed<uint8_t>();
      case 'L': r.fixed<uint8_t>(); break;
      case 'P': {
        uint8_t personality = r.fixed<uint8_t>();
        r.value_of(personality);
        break;
      }
      case 'S':
      case 'B': break;
      default: return kOmit;
    }
  }
  return 0x00;
}

// The range of the FDE at `fde` (its length past the start the table gave).
bool fde_range(const ElfFile& file, uint64_t fde, std::map<uint64_t, uint8_t>& encodings, uint64_t* range) {
  std::string bytes = file.bytes_at(fde, 32);
  Reader r{bytes};
  uint32_t length = r.fixed<uint32_t>();
  uint64_t cie_field = fde + r.at;
  uint32_t cie_offset = r.fixed<uint32_t>();
  if (!r.ok || length == 0 || length == 0xffffffffu || cie_offset == 0) return false;
  uint64_t cie = cie_field - cie_offset;
  auto known = encodings.find(cie);
  uint8_t encoding = known != encodings.end() ? known->second : (encodings[cie] = fde_encoding(file, cie));
  if (encoding == kOmit) return false;
  r.value_of(encoding);  // pc_begin: the table has it already
  *range = r.value_of(encoding);
  return r.ok;
}

}  // namespace

UnwindStarts::UnwindStarts(const ElfFile& file) {
  size_t count = 0;
  if (elf_getphdrnum(file.elf(), &count) != 0) return;
  GElf_Phdr header{};
  bool found = false;
  for (size_t i = 0; i < count && !found; ++i)
    found = gelf_getphdr(file.elf(), static_cast<int>(i), &header) != nullptr && header.p_type == PT_GNU_EH_FRAME;
  if (!found) return;
  const uint64_t table_address = header.p_vaddr;
  std::string bytes = file.bytes_at(table_address, static_cast<size_t>(header.p_filesz));
  Reader r{bytes};
  uint8_t version = r.fixed<uint8_t>(), frame_encoding = r.fixed<uint8_t>(), count_encoding = r.fixed<uint8_t>(),
          table_encoding = r.fixed<uint8_t>();
  if (!r.ok || version != 1 || table_encoding != kDatarelSdata4 || count_encoding == kOmit) return;
  r.value_of(frame_encoding);  // where .eh_frame is: not needed
  uint64_t fdes = r.value_of(count_encoding);
  if (!r.ok || fdes > bytes.size() / 8) return;
  std::map<uint64_t, uint8_t> encodings;  // by CIE
  starts_.reserve(fdes);
  ends_.reserve(fdes);
  for (uint64_t i = 0; i < fdes; ++i) {
    uint64_t start = table_address + static_cast<uint64_t>(static_cast<int64_t>(r.fixed<int32_t>()));
    uint64_t fde = table_address + static_cast<uint64_t>(static_cast<int64_t>(r.fixed<int32_t>()));
    uint64_t range = 0;
    if (!r.ok) break;
    if (!fde_range(file, fde, encodings, &range) || range == 0) continue;
    starts_.push_back(start);
    ends_.push_back(start + range);
  }
  // The linkers sort the table; a table that is not sorted is not used.
  if (!std::is_sorted(starts_.begin(), starts_.end())) {
    starts_.clear();
    ends_.clear();
  }
}

bool UnwindStarts::find(uint64_t pc, uint64_t* start) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), pc);
  if (it == starts_.begin()) return false;
  size_t index = static_cast<size_t>(it - starts_.begin()) - 1;
  if (pc >= ends_[index]) return false;
  *start = starts_[index];
  return true;
}

}  // namespace symbolize
}  // namespace heaptype
