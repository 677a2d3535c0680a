// frame_rules.hpp: how to step over a frame of code built without frame pointers.
//
// A frame-pointer walk through such code (an allocation made inside libstdc++.so or
// libc, which Debian builds without frame pointers: std::string's buffer,
// __cxa_allocate_exception; or such code calling back into the program, as
// std::time_put into an ostringstream does) skips that function's caller: the frame
// pointer register still holds the caller's frame, whose saved return address is
// one level further out, unless the function used the register for something else.
// The compiler's call frame information (DWARF CFI) says where such a frame keeps
// its return address: at a fixed distance from the stack pointer at each
// instruction, since a function without a frame pointer has no variable-size frame.
// The runtime reads that distance and where the function saved the caller's frame
// pointer, if it used the register, from the function's CFI (call_frame_info.hpp) once
// per return address and thread, and from then on steps over the frame with two loads.
// A row the walk cannot follow by itself (a realigned frame, an expression), a return
// address without CFI, and the frames a thread starts in are learned from the unwinder
// (_Unwind_Backtrace) instead, whose frames check each rule taken from the CFI.
#ifndef HEAPTYPE_RUNTIME_FRAME_RULES_HPP
#define HEAPTYPE_RUNTIME_FRAME_RULES_HPP

#include <cstddef>
#include <cstdint>

namespace heaptype {
namespace runtime {

enum class FrameKind : uint8_t {
  kEmpty = 0,
  kFramePointer,  // the function keeps a frame pointer here (or the unwinder knows nothing)
  kStackOffset,   // its canonical frame address is the stack pointer plus cfa_offset
  kOpaque,        // no way to step over it: the walk ends
  kEnd,           // the thread's start (__libc_start_call_main, start_thread...): the walk ends
  kRbpOffset,     // its CFA is rbp plus cfa_offset, other than a frame record's 16 (libffi's
                  // ffi_call_unix64, whose frame holds the call's stack arguments)
  kRbpSlot,       // its CFA is the word at rbp + cfa_offset and the caller's rbp the word at
                  // rbp + saved_rbp (GCC's realigned stack: `and $-32,%rsp` in the prologue,
                  // for a local aligned past 16 bytes; its frame record holds a copy of the
                  // return address and sits at a distance from the CFA that varies)
};

constexpr int32_t kRbpKept = INT32_MIN;  // the function left the caller's frame pointer in its register

struct FrameRule {
  uintptr_t pc;         // an address in the function: a call site or a return address
  int32_t cfa_offset;   // CFA = stack pointer at pc (kStackOffset) or rbp (kRbpOffset) + cfa_offset,
                        // or the word at rbp + cfa_offset (kRbpSlot); the return address at CFA - 8
  int32_t saved_rbp;    // the caller's frame pointer at CFA + saved_rbp (at rbp + saved_rbp for
                        // kRbpSlot), or kRbpKept
  FrameKind kind;
  // kFramePointer taken for code the unwinder knows nothing of, not read from call frame
  // information: a walk of a stack whose bounds are unknown ends there (unwind_by_rules).
  bool guessed;
};

// A thread's table starts with 1 << kFrameRuleBits slots (6 KiB: a program built with
// frame pointers learns a few rules, and a larger start spread them over pages it only
// touched for them) and doubles when three quarters are used, up to
// 1 << kMostFrameRuleBits: a large program built without frame
// pointers (a distribution's or a wheel's cmake) meets tens of thousands of return
// addresses, and a rule that finds no room is learned again, with a whole backtrace, at
// every walk that meets it.
constexpr unsigned kFrameRuleBits = 8;
constexpr unsigned kMostFrameRuleBits = 20;

struct FrameRules {
  FrameRule* slots;     // open addressing, 1 << (64 - shift) of them
  uint32_t used;
  uint32_t shift;       // 64 - log2(slots): a pc's slot is its hash's top bits
  uintptr_t last_end;   // the pc whose rule last said kEnd: where every walk of the thread ends
  uint32_t epoch;       // changes whenever a rule may have: a walk replayed needs the same rules
};

// The slot a pc hashes to in a table of 1 << (64 - shift) slots.
inline size_t frame_rule_slot(uintptr_t pc, uint32_t shift) {
  return static_cast<size_t>((pc * 0x9E3779B97F4A7C15ull) >> shift);
}

// The code of the module the runtime is linked into, built with frame pointers as the
// runtime is (`heaptype --cflags`): a return address there needs no frame rule.
// Elsewhere (libstdc++ calling back into the program, a preloaded runtime's plain
// program) the function's rule says whether it keeps one. Empty: every address asks.
extern uintptr_t g_framed_code;
extern uintptr_t g_framed_code_bytes;
inline bool in_framed_code(uintptr_t pc) { return pc - g_framed_code < g_framed_code_bytes; }

// The code of the libraries a thread or the process starts in (libc, the loader,
// libstdc++), found with g_framed_code: only their frames can be a thread's start.
struct CodeRange {
  uintptr_t start, bytes;
};
constexpr int kMostStartCode = 8;
extern CodeRange g_start_code[kMostStartCode];
extern int g_start_code_count;
inline bool in_start_code(uintptr_t pc) {
  for (int i = 0; i < g_start_code_count; ++i)
    if (pc - g_start_code[i].start < g_start_code[i].bytes) return true;
  return false;
}

// The rule of a pc not in its own slot: probed for, else learned from the unwinder.
FrameRule find_frame_rule(FrameRules& rules, uintptr_t pc);

// Slots probed inline before find_frame_rule: a preloaded GCC compiler's walks met a
// rule out of its own slot at one lookup in eight (linear probing), and the call cost
// ~60 instructions.
constexpr unsigned kInlineProbes = 4;

// The rule of the function at `pc`. Inline for the common case, every walk's first
// frame: a pc met before, in its slot or a few after it.
inline FrameRule frame_rule(FrameRules& rules, uintptr_t pc) {
  if (__builtin_expect(rules.slots != nullptr, 1)) {
    const size_t mask = (size_t{1} << (64 - rules.shift)) - 1;
    size_t i = frame_rule_slot(pc, rules.shift);
    for (unsigned probe = 0; probe < kInlineProbes; ++probe, i = (i + 1) & mask) {
      const FrameRule& slot = rules.slots[i];
      if (__builtin_expect(slot.pc == pc, 1)) return slot;
      if (slot.kind == FrameKind::kEmpty) break;
    }
  }
  return find_frame_rule(rules, pc);
}

void reset_frame_rules(FrameRules& rules);

}  // namespace runtime
}  // namespace heaptype

#endif
