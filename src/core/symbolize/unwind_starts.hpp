// unwind_starts.hpp: where the functions of an ELF file start, from its call frame
// information: the sorted table of FDEs in .eh_frame_hdr (PT_GNU_EH_FRAME) and each FDE's
// range. A program without symbols for its functions (a distribution's, stripped) still
// carries it, for the unwinder: its unnamed frames are named by the start of their
// function (module+0xstart), so that the frames of one function group as one function,
// not as one "function" per return address.
#ifndef HEAPTYPE_CORE_SYMBOLIZE_UNWIND_STARTS_HPP
#define HEAPTYPE_CORE_SYMBOLIZE_UNWIND_STARTS_HPP

#include <cstdint>
#include <vector>

#include "elf_file.hpp"

namespace heaptype {
namespace symbolize {

class UnwindStarts {
 public:
  // Reads the table of `file`; empty when it has none, or in an encoding not read here
  // (anything but the linkers' own: 4-byte offsets from the table's start).
  explicit UnwindStarts(const ElfFile& file);
  // The link-time start of the function whose FDE covers pc; false when none does.
  bool find(uint64_t pc, uint64_t* start) const;
  size_t size() const { return starts_.size(); }

 private:
  std::vector<uint64_t> starts_;
  std::vector<uint64_t> ends_;
};

}  // namespace symbolize
}  // namespace heaptype

#endif
