#include "frame_rules.hpp"

#include <unwind.h>

#include <cstring>

#include "call_frame_info.hpp"
#include "internal_memory.hpp"

namespace heaptype {
namespace runtime {
namespace {

// A walk stops at kMaxWalkedFrames (128); the backtrace also holds the runtime's own
// frames and the allocator's.
constexpr int kMaxFrames = 160;
// The most frames between a thread's start and its first function of the program's own:
// __libc_start_call_main, __libc_start_main, _start; execute_native_thread_routine,
// start_thread, clone3.
constexpr int kMostStartFrames = 4;
constexpr int kRbpRegister = 6;  // DWARF register number of rbp on x86-64

// What the unwinder says about one frame. In the context _Unwind_Backtrace hands
// over, the canonical frame address is still the callee's: the stack pointer in
// this frame at its call. This frame's own is the next frame's `sp`.
struct UnwoundFrame {
  uintptr_t ip;   // its call site or return address
  uintptr_t sp;   // its stack pointer at that call
  uintptr_t rbp;  // the frame pointer register while it runs
};

struct Backtrace {
  UnwoundFrame frames[kMaxFrames];
  int count;
};

_Unwind_Reason_Code record_frame(_Unwind_Context* context, void* arg) {
  Backtrace* b = static_cast<Backtrace*>(arg);
  if (b->count == kMaxFrames) return _URC_END_OF_STACK;
  UnwoundFrame& f = b->frames[b->count++];
  f.ip = _Unwind_GetIP(context);
  f.sp = _Unwind_GetCFA(context);
  f.rbp = _Unwind_GetGR(context, kRbpRegister);
  return f.ip ? _URC_NO_REASON : _URC_END_OF_STACK;
}

inline size_t capacity_of(uint32_t shift) { return size_t{1} << (64 - shift); }

// The slot of `pc` in `slots`: its own, or the empty one where it goes (the table is
// never full: it grows, or stops taking rules, at three quarters).
FrameRule* find(FrameRule* slots, uint32_t shift, uintptr_t pc) {
  size_t mask = capacity_of(shift) - 1;
  for (size_t i = frame_rule_slot(pc, shift);; i = (i + 1) & mask) {
    FrameRule& r = slots[i];
    if (r.pc == pc || r.kind == FrameKind::kEmpty) return &r;
  }
}

// Twice the slots, the rules moved over; false when there is no memory (the table stays).
bool grow(FrameRules& rules) {
  uint32_t shift = rules.shift - 1;
  auto* bigger = static_cast<FrameRule*>(map_pages(sizeof(FrameRule) * capacity_of(shift), MemoryUse::kCallPaths));
  if (!bigger) return false;
  size_t old_capacity = capacity_of(rules.shift);
  for (size_t i = 0; i < old_capacity; ++i)
    if (rules.slots[i].kind != FrameKind::kEmpty) *find(bigger, shift, rules.slots[i].pc) = rules.slots[i];
  unmap_pages(rules.slots, sizeof(FrameRule) * old_capacity, MemoryUse::kCallPaths);
  rules.slots = bigger;
  rules.shift = shift;
  return true;
}

void store(FrameRules& rules, const FrameRule& rule) {
  bool full = (rules.used + 1) * 4 > capacity_of(rules.shift) * 3;
  // At the largest size (or without memory) the rule is learned again next time.
  if (full && (rules.shift == 64 - kMostFrameRuleBits || !grow(rules))) return;
  FrameRule* slot = find(rules.slots, rules.shift, rule.pc);
  if (slot->kind == FrameKind::kEmpty) ++rules.used;
  *slot = rule;
}

// Whether the table holds `pc`'s rule as its CFI gave it (then `rule` takes it).
bool known_from_cfi(FrameRules& rules, uintptr_t pc, FrameRule* rule) {
  const FrameRule* known = find(rules.slots, rules.shift, pc);
  if (known->pc != pc || (known->kind != FrameKind::kStackOffset && known->kind != FrameKind::kRbpOffset &&
                          known->kind != FrameKind::kRbpSlot && known->kind != FrameKind::kEnd))
    return false;
  *rule = *known;
  return true;
}

// The rule of `kind` the CFI gives a frame, when its CFA is the unwinder's (`cfa_found`)
// and the caller's rbp can be had exactly: saved where the CFI says, or left in the
// register as the unwinder saw it. Else the walk ends there.
FrameRule cfi_rule(FrameRule rule, FrameKind kind, const FrameCfi& cfi, bool cfa_found, const UnwoundFrame& f,
                   const UnwoundFrame& caller) {
  bool exact = cfa_found && (cfi.rbp == SavedRbp::kAtCfa || (cfi.rbp == SavedRbp::kKept && caller.rbp == f.rbp));
  if (!exact) {
    rule.kind = FrameKind::kOpaque;
    return rule;
  }
  rule.kind = kind;
  rule.cfa_offset = cfi.cfa_offset;
  if (cfi.rbp == SavedRbp::kAtCfa) rule.saved_rbp = cfi.rbp_offset;
  return rule;
}

// The rule of frame `i` of the backtrace (its caller is frame i + 1).
FrameRule rule_of(const Backtrace& b, int i) {
  const UnwoundFrame& f = b.frames[i];
  FrameRule rule = {f.ip, 0, kRbpKept, FrameKind::kFramePointer, false};
  if (i + 1 >= b.count) {  // no caller to check it against
    rule.guessed = true;
    return rule;
  }
  const UnwoundFrame& caller = b.frames[i + 1];
  uintptr_t cfa = caller.sp;
  // The function's call frame information says how its CFA is computed and where it
  // saved the caller's rbp; the CFA must be the one the unwinder found. A rule the
  // walk cannot follow exactly ends the walk there.
  FrameCfi cfi = {CfaBase::kUnknown, SavedRbp::kUnknown, 0, 0};
  if (read_frame_cfi(f.ip, &cfi) && cfi.cfa_base == CfaBase::kStackPointer) {
    bool cfa_found = cfa >= f.sp && static_cast<uintptr_t>(cfi.cfa_offset) == cfa - f.sp;
    return cfi_rule(rule, FrameKind::kStackOffset, cfi, cfa_found, f, caller);
  }
  // A realigned frame: the CFA and the caller's rbp in words its rbp points near, which
  // must hold what the unwinder found (read within the frame: above its stack pointer,
  // below its CFA).
  if (cfi.cfa_base == CfaBase::kRbpSlot && cfi.rbp == SavedRbp::kAtRbp) {
    uintptr_t cfa_slot = f.rbp + static_cast<uintptr_t>(static_cast<intptr_t>(cfi.cfa_offset));
    uintptr_t rbp_slot = f.rbp + static_cast<uintptr_t>(static_cast<intptr_t>(cfi.rbp_offset));
    auto in_frame = [&](uintptr_t slot) { return slot >= f.sp && slot + sizeof(uintptr_t) <= cfa; };
    if (in_frame(cfa_slot) && in_frame(rbp_slot) && *reinterpret_cast<const uintptr_t*>(cfa_slot) == cfa &&
        *reinterpret_cast<const uintptr_t*>(rbp_slot) == caller.rbp) {
      rule.kind = FrameKind::kRbpSlot;
      rule.cfa_offset = cfi.cfa_offset;
      rule.saved_rbp = cfi.rbp_offset;
      return rule;
    }
    rule.kind = FrameKind::kOpaque;
    return rule;
  }
  // A frame pointer (also a realigned frame, such as main's, whose CFA is an expression).
  if (f.rbp + 2 * sizeof(uintptr_t) == cfa) return rule;
  // A CFA at another distance from rbp, the caller's rbp saved at a place the CFI names.
  bool cfa_found = cfi.cfa_base == CfaBase::kFramePointer && cfa > f.sp &&
                   f.rbp + static_cast<uintptr_t>(cfi.cfa_offset) == cfa;
  return cfi_rule(rule, FrameKind::kRbpOffset, cfi, cfa_found, f, caller);
}

// Whether frame `i` of a backtrace that reached the bottom of the stack starts the
// thread: it and its callers (the last one aside: _start, clone3) lie in the libraries
// threads start in, a few frames at most. (A function of the program at the bottom of
// a stack may be called from deeper code too: its callers would be lost there.)
bool starts_the_thread(const Backtrace& b, int i) {
  int last = b.count - 1;
  if (last >= 0 && b.frames[last].ip == 0) --last;  // where the unwinder found no caller
  if (b.count == kMaxFrames || last - i + 1 > kMostStartFrames) return false;
  for (int j = i; j < last; ++j)
    if (!in_start_code(b.frames[j].ip)) return false;
  return true;
}

// The rule of frame `i`, where the frames that start the thread are left out of every
// path (the analysis drops them): the walk ends at the first, and need not step over
// the others.
FrameRule learned_rule(const Backtrace& b, int i) {
  FrameRule rule = rule_of(b, i);
  if ((rule.kind == FrameKind::kStackOffset || rule.kind == FrameKind::kRbpOffset ||
       rule.kind == FrameKind::kRbpSlot) &&
      starts_the_thread(b, i))
    rule.kind = FrameKind::kEnd;
  return rule;
}

// Asks the unwinder about the current stack and learns the rules of the frame at
// `pc` and of its callers.
FrameRule calibrate(FrameRules& rules, uintptr_t pc) {
  Backtrace b;
  b.count = 0;
  _Unwind_Backtrace(record_frame, &b);
  int i = 1;
  while (i < b.count && b.frames[i].ip != pc) ++i;
  if (i >= b.count) {
    // Not a return address of this stack as the unwinder sees it: past the frames a
    // full backtrace holds, the walk ends there; else (code the unwinder knows nothing
    // of) it walks on by the frame pointer. Either way the next walk meeting it does
    // not ask again (a walk that asked at every meeting took a backtrace each time).
    FrameKind kind = b.count == kMaxFrames ? FrameKind::kOpaque : FrameKind::kFramePointer;
    FrameRule unknown = {pc, 0, kRbpKept, kind, true};
    store(rules, unknown);
    return unknown;
  }
  FrameRule first = learned_rule(b, i);
  // The last frame of a backtrace cut at kMaxFrames has no caller in it: its rule is
  // unknown (it keeps a frame pointer or not): this walk ends there, and the next
  // one meeting it asks again. The last frame of a whole backtrace is where the
  // unwinder itself stops (code without call frame information: the bottom of a
  // coroutine's stack, boost.context's `finish`): every walk ends there, and the rule
  // is kept (pdns_recursor took a backtrace for each allocation on its coroutines).
  if (i + 1 >= b.count) {
    FrameRule end = {pc, 0, kRbpKept, FrameKind::kOpaque, false};
    if (b.count < kMaxFrames) store(rules, end);
    return end;
  }
  store(rules, first);
  // The walk asks the rule of every return address outside the runtime's module: one
  // backtrace teaches the rules of the whole stack above (a preloaded test suite's
  // walks asked for a third more backtraces when only the frames up to the first one
  // with a frame pointer were learned). A frame the unwinder ended at is not learned,
  // nor the last one of a backtrace cut at kMaxFrames (a deep recursion's): a rule
  // taken for it without its caller made every later walk through it end there
  // (399 of GCC's allocations compiling a template-heavy file were rooted at one).
  // A frame whose rule came from its CFI at an earlier backtrace keeps it (the CFI
  // reads were two fifths of the instructions of GCC's compiler's backtraces); a
  // frame-pointer or opaque rule may have been a guess, and is learned again.
  for (FrameRule r = first; r.kind != FrameKind::kEnd && ++i + 1 < b.count && b.frames[i].ip;) {
    if (known_from_cfi(rules, b.frames[i].ip, &r)) continue;
    r = learned_rule(b, i);
    if (!in_framed_code(r.pc)) store(rules, r);
  }
  return first;
}

// The rule of a return address, read from its function's CFI row alone, without a
// backtrace, where the row says exactly how to step over the frame. It is the rule a
// backtrace would teach (rule_of reads the same row, and the unwinder computes the CFA
// and the caller's rbp from it).
// - In the program's own code (built with frame pointers, the module the runtime is
//   linked into), a frame record: CFA = rbp + 16, the caller's rbp at CFA - 16. The
//   unwinder's backtrace of a test suite's deep stacks cost ~50,000 instructions each,
//   a CFI read ~3,000 (yaml-cpp's tests: 2,469 of 2,584 backtraces were for such call
//   sites). A function of that module built without frame pointers (a prebuilt static
//   library) says otherwise in its CFI, and is calibrated.
// - Elsewhere, but for the code threads start in: also a CFA from the stack pointer
//   (kStackOffset) or from rbp at another distance (kRbpOffset), the caller's rbp saved
//   at a fixed place from the CFA or left in the register. A program built without frame
//   pointers meets a new return address at every new function on its paths, and
//   nlohmann/json's parser tests took 1,511 backtraces of ~43,000 instructions each, a
//   CFI read ~6,000.
// Rows the walk cannot follow alone (a realigned frame's, an expression's, a signal
// frame's, none), and the frames a thread starts in (only a backtrace sees where the
// stack ends), are calibrated.
bool rule_from_cfi(uintptr_t pc, FrameRule* rule) {
  const bool framed = in_framed_code(pc);
  if (!framed && in_start_code(pc)) return false;
  FrameCfi cfi = {CfaBase::kUnknown, SavedRbp::kUnknown, 0, 0};
  if (!read_frame_cfi(pc, &cfi)) return false;
  constexpr int32_t kFrameRecord = 2 * sizeof(uintptr_t);
  if (cfi.cfa_base == CfaBase::kFramePointer && cfi.cfa_offset == kFrameRecord && cfi.rbp == SavedRbp::kAtCfa &&
      cfi.rbp_offset == -kFrameRecord) {
    *rule = {pc, 0, kRbpKept, FrameKind::kFramePointer, false};
    return true;
  }
  if (framed || (cfi.rbp != SavedRbp::kAtCfa && cfi.rbp != SavedRbp::kKept) || cfi.cfa_offset <= 0) return false;
  int32_t saved_rbp = cfi.rbp == SavedRbp::kAtCfa ? cfi.rbp_offset : kRbpKept;
  if (cfi.cfa_base == CfaBase::kStackPointer) {
    *rule = {pc, cfi.cfa_offset, saved_rbp, FrameKind::kStackOffset, false};
    return true;
  }
  if (cfi.cfa_base != CfaBase::kFramePointer || cfi.rbp != SavedRbp::kAtCfa) return false;
  *rule = {pc, cfi.cfa_offset, saved_rbp, FrameKind::kRbpOffset, false};
  return true;
}

}  // namespace

uintptr_t g_framed_code = 0;
uintptr_t g_framed_code_bytes = 0;
CodeRange g_start_code[kMostStartCode];
int g_start_code_count = 0;

FrameRule find_frame_rule(FrameRules& rules, uintptr_t pc) {
  if (__builtin_expect(!rules.slots, 0)) {
    ++rules.epoch;
    rules.shift = 64 - kFrameRuleBits;
    rules.slots = static_cast<FrameRule*>(map_pages(sizeof(FrameRule) * capacity_of(rules.shift), MemoryUse::kCallPaths));
    if (!rules.slots) return {pc, 0, kRbpKept, FrameKind::kFramePointer, true};
  }
  FrameRule* found = find(rules.slots, rules.shift, pc);
  if (found->pc == pc) return *found;
  ++rules.epoch;  // rules learned (or not kept: learned again, perhaps otherwise)
  FrameRule known;
  if (rule_from_cfi(pc, &known)) {
    store(rules, known);
    return known;
  }
  return calibrate(rules, pc);
}

void reset_frame_rules(FrameRules& rules) {
  if (rules.slots) std::memset(rules.slots, 0, sizeof(FrameRule) * capacity_of(rules.shift));
  rules.used = 0;
  rules.last_end = 0;
  ++rules.epoch;
}

}  // namespace runtime
}  // namespace heaptype
