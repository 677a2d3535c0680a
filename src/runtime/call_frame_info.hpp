// call_frame_info.hpp: what a function's call frame information (DWARF CFI, the
// .eh_frame the unwinder reads) says about its frame at one return address: how its
// canonical frame address (CFA) is computed, and where it saved its caller's frame
// pointer register, if it did.
//
// The unwinder (_Unwind_Backtrace) gives every frame's register values but not where
// a value was saved. Looking for the caller's rbp value in the frame finds, besides
// the slot the function pushed it to, any stale local that happens to hold the same
// value (glibc's __tz_convert, reached from a test body: a slot below the pushes held
// the caller's frame pointer at the first walk, not at later ones, and 20,784
// allocations lost every caller of the test body). The CFI names the slot.
#ifndef HEAPTYPE_RUNTIME_CALL_FRAME_INFO_HPP
#define HEAPTYPE_RUNTIME_CALL_FRAME_INFO_HPP

#include <cstdint>

namespace heaptype {
namespace runtime {

enum class CfaBase : uint8_t {
  kUnknown,       // another register or an expression: nothing the walk can use
  kStackPointer,  // CFA = rsp + cfa_offset at the call
  kFramePointer,  // CFA = rbp + cfa_offset
  kRbpSlot,       // CFA = the word at rbp + cfa_offset (GCC's realigned frames: DW_OP_breg6 N; DW_OP_deref)
};

enum class SavedRbp : uint8_t {
  kKept,     // the function leaves the register as its caller had it (no rule, same value)
  kAtCfa,    // the caller's value is in the stack at CFA + rbp_offset
  kAtRbp,    // at rbp + rbp_offset (a realigned frame: DW_CFA_expression rbp, DW_OP_breg6 N)
  kUnknown,  // in another register, or computed by an expression
};

struct FrameCfi {
  CfaBase cfa_base;
  SavedRbp rbp;
  int32_t cfa_offset;
  int32_t rbp_offset;
};

// The rules in effect at the call before `return_address`, from the FDE the unwinder
// finds for it; false when there is none, or it uses what this reader does not read
// (a signal frame, 64-bit lengths, DW_CFA_set_loc). Reads only the loaded .eh_frame;
// allocates nothing.
bool read_frame_cfi(uintptr_t return_address, FrameCfi* out);

}  // namespace runtime
}  // namespace heaptype

#endif
