// call_context.hpp: where each allocation came from, as a calling context tree.
//
// With -finstrument-functions the compiler calls __cyg_profile_func_enter/exit
// around every function. Each thread keeps a shadow stack of the functions it is
// in; every frame caches its node in the thread's calling-context tree, so the
// node of an allocation is the top frame's: O(1), the paper's memoised lookup.
// Each thread grows its own subtree of the process's tree (a root per thread),
// so no lock guards it; a new node is announced once, as a NODE record in the
// thread's event stream.
//
// Exits that never come (longjmp; exceptions where the compiler emits no exit
// hook on unwinding) leave stale frames: a frame whose recorded stack pointer lies
// below the current one is gone, and an exit hook for a function found lower in
// the shadow stack pops everything above it.
//
// Without the hooks (the default build: -fno-omit-frame-pointer
// -mno-omit-leaf-frame-pointer), each allocation walks the frame-pointer chain, a
// cost per allocation rather than per call. Frames of code without frame pointers
// (libstdc++ and libc: where an allocation is made, or calling back into the
// program) are stepped over by their frame rules (frame_rules.hpp), asked for every
// return address outside the module the runtime is linked into; the frames a thread
// starts in end the walk. The walk stays inside the thread's stack, so a register
// that code without frame pointers used for something else ends it instead of faulting.
// A thread whose walks step over many frames by their rules (a program without frame
// pointers) replays the last walk's steps from the first state both share, checking
// each word they read (WalkStep). The return addresses are mapped to the thread's tree
// through the path of the previous walk: the frames two allocations share from the
// outermost in (most of them) cost one comparison each, and NODE records carry the
// return address only (function 0); the symbolizer recovers the functions, inlined
// ones included, from DWARF.
//
// HEAPTYPE_CALLSTACK: auto (default) uses the shadow stack on threads whose hooks
// run and frame pointers elsewhere; instrument, frame-pointer force one; unwind uses
// the unwinder (_Unwind_Backtrace: DWARF, for code without frame pointers, at many
// times the cost); none records call sites only.
#ifndef HEAPTYPE_RUNTIME_CALL_CONTEXT_HPP
#define HEAPTYPE_RUNTIME_CALL_CONTEXT_HPP

#include <cstddef>
#include <cstdint>

#include "../format/profile_format.hpp"
#include "frame_rules.hpp"

namespace heaptype {
namespace runtime {

struct ThreadState;

enum class CallstackMode { kAuto, kInstrument, kFramePointer, kUnwind, kNone };

struct CallFrame {
  uintptr_t function;
  uintptr_t call_site;
  uintptr_t stack_pointer;  // the instrumented function's stack pointer at entry
  uint32_t node;
  uint32_t parent;          // the node below: a loop's next call at this depth
                            // reuses `node` when function, call site and parent match
};

struct ContextNode {
  uintptr_t function;
  uintptr_t call_site;
  uint32_t parent;
  uint32_t last_found;  // the child found last: loops call the same callee again
};

// The nodes a thread keeps to find them again. A test suite's binary reaches a new
// call path with almost every allocation (each test is a new path to the same code),
// so a tree kept whole grows with the allocations, not with what the program uses at
// a time. When this many nodes are kept, the thread forgets them (a new generation)
// and numbers on: a path met again gets new nodes under the same numbering, which
// the reader merges with the old by their return addresses. Nothing else changes:
// caches that name older nodes still name real ones. A program whose paths in use need
// more nodes than a generation keeps forgets them before it meets them again and writes
// them anew at nearly every allocation: rapidjson's perftest, a recursive parser over one
// document (44,960 nodes), wrote 61 MiB (594 MiB aggregated) with 32,768 nodes a
// generation, 248 KB (240 KB) with 65,536; yaml-cpp's test binary, whose paths are new at
// every test, takes 1.5 MiB more of RSS for it (21.1 MiB, plain 14.9).
constexpr uint32_t kNodesPerGeneration = 1u << 16;

constexpr uint32_t kMaxShadowDepth = 1024;
constexpr unsigned kChildCacheBits = 9;
constexpr uint32_t kChildCacheSize = 1u << kChildCacheBits;  // entries, a power of two: 12 KiB stays in L1

// Direct-mapped cache of (parent, function, call site) -> child: a function that
// calls several others in turn (a dispatch loop) finds each child in one probe.
struct ChildCacheEntry {
  uintptr_t function;
  uintptr_t call_site;
  uint32_t parent;
  uint32_t child;  // 0: empty
};

constexpr int kMaxWalkedFrames = 128;
// The outermost "return address" of a walk that left callers out.
constexpr uintptr_t kWalkCut = format::kWalkCut;

// Where a walk with more callers than it keeps is cut. A cut path keeps its innermost
// callers, and the next allocation of a recursion, a few levels up or down, shares
// nothing with it when each keeps the innermost kMaxWalkedFrames: its window moved by
// those levels, every node of its path is another (rapidjson's perftest: 129 tree
// lookups an allocation, half its time). So a thread remembers the frame just past its
// last cut (the word its return address was read from, and that address) and the next
// cut walk that passes the same frame among its callers kKeptFramesAtLeast to
// kMaxWalkedFrames is cut there too: the windows end at one frame and share their outer
// nodes. A walk that passes no such frame is cut after kKeptFramesAtFirst callers, the
// middle of that span, where the next walks find it at up to 32 levels up or down. A
// stack that fits in kMaxWalkedFrames is never cut.
constexpr int kKeptFramesAtLeast = 64;
constexpr int kKeptFramesAtFirst = 96;
struct CutAnchor {
  uintptr_t slot;            // where the first caller left out kept its return address
  uintptr_t return_address;  // and that address
};
struct CutState {
  CutAnchor anchor;    // the frame the last cut walk stopped before
  CutAnchor at_first;  // the walk's caller at kKeptFramesAtFirst
  uint32_t anchored;   // the walk's callers before the anchor, or 0 (set at kKeptFramesAtLeast)
};

// A walked stack seen before, and its node: most allocations repeat one of a few
// stacks, which then cost their walk and one comparison per frame. (Deeper stacks
// skip it: a recursive parser's deep paths are too many for any table of them to hit;
// rapidjson's perftest met some 40,000 distinct paths cut at kMaxWalkedFrames in
// every pass, and a table of 65,536 took half of them. CutAnchor serves those.)
constexpr uint32_t kKnownPathFrames = 32;
constexpr unsigned kKnownPathBits = 7;
struct KnownPath {
  uint64_t hash;          // path_hash: of its ends, depth and the sum of its return addresses
  uint32_t depth;
  uint32_t node;
  uintptr_t return_addresses[kKnownPathFrames];  // innermost first
};

// One step of a walk, as the next walk replays it: the state the walk is in after it
// (a function's return address `pc`, its stack pointer `sp` and rbp `next`; or, in the
// frame-pointer chain, the frame record read at `sp` and the next one `next`) and the
// words it read to get there. A walk is a function of its state and the words it
// reads: the next walk that reaches the same state, on the same rules, takes the
// steps after it where every word they read still holds what it held (each checked:
// independent loads, where stepping frame by frame by rules is a chain of dependent
// ones, a table lookup each).
enum class StepKind : uint8_t {
  kChain = 0,  // a frame record at sp (saved rbp `next`, return address `pc` into the framed module)
  kRule = 1,   // a frame stepped over by its rule: pc read at sp - 8 (sp: the CFA, computed from
               // the state before), rbp read at sp + rbp_from (kRbpKept: left in the register)
  kSkip = 2,   // a frame record at sp whose "return address" lay in the first pages: not a frame
  kLeave = 3,  // a frame record at sp - 16 returning outside the framed module: its rule goes on
};
// Chain and skip steps leave the walk in the frame-pointer chain; rule and leave steps
// at a function whose rule decides (its pc matters then).
inline bool in_rule_state(StepKind kind) { return static_cast<uint8_t>(kind) & 1; }

struct WalkStep {
  uintptr_t sp;
  uintptr_t next;
  uintptr_t pc;
  int32_t rbp_from;
  StepKind kind;
};

// Emitted frames, the steps over first-page words and a margin: a walk with more
// steps is not kept for the next.
constexpr uint32_t kMaxWalkSteps = 2 * kMaxWalkedFrames + 8;

// Replaying costs a log of every step: worth it where frames are stepped over by their
// rules (a program without frame pointers: `heaptype run`), not along a frame-pointer
// chain, which costs less a frame than the log (alloc_bench: +370 instructions an
// allocation with the log, for nothing). A thread logs while its last walk took this
// many rule steps.
constexpr uint32_t kReplayFromRuleSteps = 8;

// The last walk's steps, and what they were taken under.
struct WalkMemo {
  WalkStep* steps[2];  // the last walk's (`last`) and the one the next walk logs into
  uint32_t count;      // steps of the last walk; 0: nothing to replay
  uint32_t rule_steps; // of the last walk
  uint32_t rules_epoch;
  uintptr_t last_end;  // the rules' last_end when it started
  uintptr_t high;      // the top of the stack it walked
  uint8_t last;
};

// Per-thread state; lives in ThreadState, zero-initialised.
struct CallContext {
  CallFrame* frames;        // kMaxShadowDepth entries, mapped on first use
  KnownPath* known_paths;   // 1 << kKnownPathBits entries
  FrameRules frame_rules;   // functions without frame pointers at the start of a walk
  WalkMemo walk_memo;       // the previous walk's steps
  CutState cut;             // where deep walks are cut
  uintptr_t* walk_path;     // the previous walk's return addresses, outermost first
  uint32_t* walk_nodes;     // and the node of each
  uint32_t walk_depth;
  uint32_t depth;           // may exceed kMaxShadowDepth: deeper frames are counted only
  bool hooks_seen;
  volatile bool in_hook;    // a signal handler's hooks inside ours do nothing
  ChildCacheEntry* cache;   // kChildCacheSize entries
  ContextNode* nodes;       // the generation's nodes: node number first_node + i at i
  uint32_t first_node;      // (the first generation starts with the thread's root, 0)
  uint32_t node_count;
  uint32_t node_capacity;
  uint32_t* child_index;    // open addressing: the generation's node ids by (parent, function, call site)
  uint32_t index_capacity;  // a power of two, at least twice the nodes
};

// True while the enter hook should work (runtime active, mode uses the hooks).
extern bool g_hooks_enabled;
// Whether allocations look for a calling context at all (not mode none).
extern bool g_contexts_enabled;

void set_callstack_mode(CallstackMode mode);
CallstackMode callstack_mode();

// The node of an allocation whose call returns to `call_site`; `frame` is the frame
// address of the function the program called (its saved frame pointer and return
// address are there). May write NODE records: the thread's own, inside the runtime.
uint32_t allocation_context(ThreadState* t, uintptr_t call_site, uintptr_t frame);

// Empties the thread's tree and shadow stack (a new or reused thread state).
void reset_call_context(ThreadState* t);

// A forked child starts a new tree (the parent's nodes are in the parent's
// profile), but is still inside the functions on its shadow stack: their path is
// created again in the new tree.
void rebuild_call_context_after_fork(ThreadState* t);

}  // namespace runtime
}  // namespace heaptype

#endif
