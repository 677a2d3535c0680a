#include "call_frame_info.hpp"

#include <cstring>

#include "../format/profile_format.hpp"

// Exported by libgcc_s and LLVM's libunwind: the FDE covering `pc` (through
// PT_GNU_EH_FRAME's sorted table, or frames registered by a JIT), with the start of
// its function in bases->func. Weak: where no unwinder provides it, nothing is read.
struct dwarf_eh_bases {
  void* tbase;
  void* dbase;
  void* func;
};
extern "C" const void* _Unwind_Find_FDE(const void* pc, dwarf_eh_bases* bases) __attribute__((weak));

namespace heaptype {
namespace runtime {
namespace {

constexpr uint64_t kRbp = 6;  // DWARF register numbers on x86-64
constexpr uint64_t kRsp = 7;
constexpr uint64_t kRbpSlotCfa = ~uint64_t{0};  // Row::cfa_register: CFA = [rbp + cfa_offset]
constexpr uint8_t kOpBregRbp = 0x76;  // DW_OP_breg6
constexpr uint8_t kOpDeref = 0x06;    // DW_OP_deref
constexpr int kMostRememberedStates = 8;
constexpr uint32_t kMostEntryBytes = 1u << 20;

// A cursor over one CIE's or FDE's bytes; a read past `end` marks it failed.
struct Reader {
  const uint8_t* at;
  const uint8_t* end;
  bool failed = false;

  bool has(size_t n) {
    if (static_cast<size_t>(end - at) < n) failed = true;
    return !failed;
  }
  uint8_t u8() { return has(1) ? *at++ : 0; }
  uint64_t fixed(size_t n) {
    uint64_t v = 0;
    if (has(n)) {
      std::memcpy(&v, at, n);  // x86-64: little-endian, as the file is
      at += n;
    }
    return v;
  }
  uint64_t uleb() {  // the profile's varints are the same encoding
    uint64_t v = 0;
    if (!failed && !format::get_varint(&at, end, &v)) failed = true;
    return v;
  }
  int64_t sleb() {
    uint64_t v = 0;
    unsigned shift = 0;
    for (; has(1); ) {
      uint8_t b = *at++;
      if (shift < 64) v |= uint64_t{b & 0x7fu} << shift;
      shift += 7;
      if (!(b & 0x80)) {
        if (shift < 64 && (b & 0x40)) v |= ~uint64_t{0} << shift;
        return static_cast<int64_t>(v);
      }
    }
    return 0;
  }
  void skip(uint64_t n) {
    if (has(n)) at += n;
  }
  // Steps over a pointer in DW_EH_PE encoding `encoding` (its value is not needed:
  // the FDE's function start comes from _Unwind_Find_FDE).
  void skip_encoded(uint8_t encoding) {
    if (encoding == 0xff) return;  // DW_EH_PE_omit
    if ((encoding & 0x70) == 0x50) {  // DW_EH_PE_aligned
      uintptr_t a = reinterpret_cast<uintptr_t>(at);
      skip(((a + 7) & ~uintptr_t{7}) - a);
      skip(8);
      return;
    }
    switch (encoding & 0x0f) {
      case 0x00: skip(8); break;            // absptr
      case 0x01: uleb(); break;
      case 0x02: case 0x0a: skip(2); break;  // udata2, sdata2
      case 0x03: case 0x0b: skip(4); break;  // udata4, sdata4
      case 0x04: case 0x0c: skip(8); break;  // udata8, sdata8
      case 0x09: sleb(); break;
      default: failed = true;
    }
  }
};

// The length-prefixed entry at `p` (a CIE or an FDE): its bytes after the length.
bool entry_at(const uint8_t* p, Reader* r) {
  uint32_t length;
  std::memcpy(&length, p, 4);
  if (length == 0 || length >= kMostEntryBytes) return false;  // 0xffffffff: 64-bit, not read
  r->at = p + 4;
  r->end = p + 4 + length;
  return true;
}

struct Cie {
  uint64_t code_align;
  int64_t data_align;
  uint8_t fde_encoding = 0;
  bool has_augmentation_data = false;
  Reader instructions;
};

bool read_cie(const uint8_t* p, Cie* cie) {
  Reader r;
  if (!entry_at(p, &r) || r.fixed(4) != 0) return false;  // a CIE's id is 0 in .eh_frame
  uint8_t version = r.u8();
  const char* augmentation = reinterpret_cast<const char*>(r.at);
  size_t letters = strnlen(augmentation, r.end - r.at);
  r.skip(letters + 1);
  cie->code_align = r.uleb();
  cie->data_align = r.sleb();
  if (version == 1) r.u8(); else r.uleb();  // the return address register
  if (letters && augmentation[0] == 'z') {
    cie->has_augmentation_data = true;
    uint64_t bytes = r.uleb();
    const uint8_t* after = r.at + bytes;
    for (size_t i = 1; i < letters && !r.failed; ++i) {
      switch (augmentation[i]) {
        case 'R': cie->fde_encoding = r.u8(); break;
        case 'L': r.u8(); break;
        case 'P': r.skip_encoded(r.u8()); break;
        case 'S': return false;  // a signal frame: its pc is not a return address
        default: return false;
      }
    }
    if (r.failed || after > r.end) return false;
    r.at = after;
  } else if (letters) {
    return false;  // "eh" and other old forms
  }
  cie->instructions = r;
  return !r.failed;
}

// The two rules the walk needs, as the CFA program changes them row by row.
struct Row {
  uint64_t cfa_register = kRsp;
  int64_t cfa_offset = 8;
  bool cfa_known = true;
  SavedRbp rbp = SavedRbp::kKept;
  int64_t rbp_offset = 0;
};

struct Program {
  Program(const Cie& c, uintptr_t start, uintptr_t until) : cie(c), location(start), target(until) {}
  const Cie& cie;
  Row initial;  // after the CIE's instructions: what DW_CFA_restore returns to
  Row row;
  Row remembered[kMostRememberedStates];
  int depth = 0;
  uintptr_t location;  // the address the row being built starts at
  uintptr_t target;    // the address whose row is wanted
};

// The one expression form read here: DW_OP_breg6 N, then DW_OP_deref when `deref`, and
// nothing else (GCC's stack realignment: the CFA saved at rbp - 8, the caller's rbp at
// rbp). Its N, or false.
bool rbp_expression(Reader& r, bool deref, int64_t* offset) {
  uint64_t length = r.uleb();
  if (r.failed || !r.has(length)) return false;
  Reader e{r.at, r.at + length};
  r.skip(length);
  if (e.u8() != kOpBregRbp) return false;
  *offset = e.sleb();
  if (deref && e.u8() != kOpDeref) return false;
  return !e.failed && e.at == e.end;
}

void set_rbp(Row& row, SavedRbp how, int64_t offset = 0) {
  row.rbp = how;
  row.rbp_offset = offset;
}

// Runs instructions until the row that covers `target` is complete: false when the
// program uses what is not read here.
bool run(Program& p, Reader r) {
  while (r.at < r.end && !r.failed) {
    uint8_t op = r.u8();
    uint8_t operand = op & 0x3f;
    uint64_t reg;
    switch (op & 0xc0) {
      case 0x40:  // DW_CFA_advance_loc
        p.location += operand * p.cie.code_align;
        if (p.location > p.target) return true;
        continue;
      case 0x80:  // DW_CFA_offset
        if (operand == kRbp) {
          int64_t offset = static_cast<int64_t>(r.uleb()) * p.cie.data_align;
          set_rbp(p.row, SavedRbp::kAtCfa, offset);
        } else {
          r.uleb();
        }
        continue;
      case 0xc0:  // DW_CFA_restore
        if (operand == kRbp) set_rbp(p.row, p.initial.rbp, p.initial.rbp_offset);
        continue;
    }
    switch (op) {
      case 0x00: break;  // DW_CFA_nop
      case 0x02: case 0x03: case 0x04: {  // DW_CFA_advance_loc1, 2, 4
        p.location += r.fixed(op == 0x02 ? 1 : op == 0x03 ? 2 : 4) * p.cie.code_align;
        if (p.location > p.target) return !r.failed;
        break;
      }
      case 0x05: case 0x11: case 0x2f: {  // DW_CFA_offset_extended, _sf, GNU_negative_offset_extended
        reg = r.uleb();
        int64_t offset = op == 0x11 ? r.sleb() * p.cie.data_align
                       : op == 0x05 ? static_cast<int64_t>(r.uleb()) * p.cie.data_align
                                    : -static_cast<int64_t>(r.uleb()) * p.cie.data_align;
        if (reg == kRbp) set_rbp(p.row, SavedRbp::kAtCfa, offset);
        break;
      }
      case 0x06:  // DW_CFA_restore_extended
        if (r.uleb() == kRbp) set_rbp(p.row, p.initial.rbp, p.initial.rbp_offset);
        break;
      case 0x07: case 0x08:  // DW_CFA_undefined, DW_CFA_same_value
        if (r.uleb() == kRbp) set_rbp(p.row, op == 0x08 ? SavedRbp::kKept : SavedRbp::kUnknown);
        break;
      case 0x09:  // DW_CFA_register
        reg = r.uleb();
        r.uleb();
        if (reg == kRbp) set_rbp(p.row, SavedRbp::kUnknown);
        break;
      case 0x0a:  // DW_CFA_remember_state
        if (p.depth == kMostRememberedStates) return false;
        p.remembered[p.depth++] = p.row;
        break;
      case 0x0b:  // DW_CFA_restore_state
        if (p.depth == 0) return false;
        p.row = p.remembered[--p.depth];
        break;
      case 0x0c: case 0x12:  // DW_CFA_def_cfa, DW_CFA_def_cfa_sf
        p.row.cfa_register = r.uleb();
        p.row.cfa_offset = op == 0x0c ? static_cast<int64_t>(r.uleb()) : r.sleb() * p.cie.data_align;
        p.row.cfa_known = true;
        break;
      case 0x0d:  // DW_CFA_def_cfa_register
        p.row.cfa_register = r.uleb();
        break;
      case 0x0e:  // DW_CFA_def_cfa_offset
        p.row.cfa_offset = static_cast<int64_t>(r.uleb());
        break;
      case 0x13:  // DW_CFA_def_cfa_offset_sf
        p.row.cfa_offset = r.sleb() * p.cie.data_align;
        break;
      case 0x0f: {  // DW_CFA_def_cfa_expression
        int64_t offset = 0;
        p.row.cfa_known = rbp_expression(r, true, &offset);
        p.row.cfa_register = kRbpSlotCfa;
        p.row.cfa_offset = offset;
        break;
      }
      case 0x10: {  // DW_CFA_expression: the register saved at the address it computes
        reg = r.uleb();
        int64_t offset = 0;
        bool read = rbp_expression(r, false, &offset);
        if (reg == kRbp) set_rbp(p.row, read ? SavedRbp::kAtRbp : SavedRbp::kUnknown, offset);
        break;
      }
      case 0x16:  // DW_CFA_val_expression
        reg = r.uleb();
        r.skip(r.uleb());
        if (reg == kRbp) set_rbp(p.row, SavedRbp::kUnknown);
        break;
      case 0x14: case 0x15:  // DW_CFA_val_offset, _sf
        reg = r.uleb();
        if (op == 0x14) r.uleb(); else r.sleb();
        if (reg == kRbp) set_rbp(p.row, SavedRbp::kUnknown);
        break;
      case 0x2e:  // DW_CFA_GNU_args_size
        r.uleb();
        break;
      default:  // DW_CFA_set_loc and anything newer
        return false;
    }
  }
  return !r.failed;
}

bool fits_int32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

}  // namespace

bool read_frame_cfi(uintptr_t return_address, FrameCfi* out) {
  if (!_Unwind_Find_FDE || return_address == 0) return false;
  // The call is the instruction before the return address, whose row may differ from
  // the return address's (a call to a function that does not return ends its caller).
  uintptr_t call = return_address - 1;
  dwarf_eh_bases bases = {};
  const uint8_t* fde = static_cast<const uint8_t*>(_Unwind_Find_FDE(reinterpret_cast<const void*>(call), &bases));
  Reader r;
  if (!fde || !entry_at(fde, &r)) return false;
  uint32_t cie_distance = static_cast<uint32_t>(r.fixed(4));  // back from this field to the CIE
  Cie cie;
  if (cie_distance == 0 || !read_cie(fde + 4 - cie_distance, &cie)) return false;
  r.skip_encoded(cie.fde_encoding);         // the function's start: bases.func
  r.skip_encoded(cie.fde_encoding & 0x0f);  // its length
  if (cie.has_augmentation_data) r.skip(r.uleb());
  if (r.failed) return false;
  Program p(cie, reinterpret_cast<uintptr_t>(bases.func), call);
  if (!run(p, cie.instructions)) return false;
  p.initial = p.row;
  if (!run(p, r)) return false;
  const Row& row = p.row;
  out->cfa_base = !row.cfa_known ? CfaBase::kUnknown
                : row.cfa_register == kRsp ? CfaBase::kStackPointer
                : row.cfa_register == kRbp ? CfaBase::kFramePointer
                : row.cfa_register == kRbpSlotCfa ? CfaBase::kRbpSlot
                                           : CfaBase::kUnknown;
  out->rbp = row.rbp;
  if (!fits_int32(row.cfa_offset) || !fits_int32(row.rbp_offset)) return false;
  out->cfa_offset = static_cast<int32_t>(row.cfa_offset);
  out->rbp_offset = static_cast<int32_t>(row.rbp_offset);
  return true;
}

}  // namespace runtime
}  // namespace heaptype
