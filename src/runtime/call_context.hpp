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
// Code built without the hooks can still get calling contexts: HEAPTYPE_CALLSTACK
// = frame-pointer walks the frame pointer chain (needs -fno-omit-frame-pointer),
// = unwind uses the unwinder (_Unwind_Backtrace), = none records call sites only.
// The default, auto, uses the shadow stack wherever the hooks run.
#ifndef HEAPTYPE_RUNTIME_CALL_CONTEXT_HPP
#define HEAPTYPE_RUNTIME_CALL_CONTEXT_HPP

#include <cstddef>
#include <cstdint>

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
  uint32_t first_child;
  uint32_t next_sibling;
  uint32_t last_found;  // the child found last: loops call the same callee again
};

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

// Per-thread state; lives in ThreadState, zero-initialised.
struct CallContext {
  CallFrame* frames;        // kMaxShadowDepth entries, mapped on first use
  uint32_t depth;           // may exceed kMaxShadowDepth: deeper frames are counted only
  bool hooks_seen;
  volatile bool in_hook;    // a signal handler's hooks inside ours do nothing
  ChildCacheEntry* cache;   // kChildCacheSize entries
  ContextNode* nodes;       // index 0 is the thread's root
  uint32_t node_count;
  uint32_t node_capacity;
};

// True while the enter hook should work (runtime active, mode uses the hooks).
extern bool g_hooks_enabled;

void set_callstack_mode(CallstackMode mode);
CallstackMode callstack_mode();

// The node for an allocation made by code whose stack pointer is `caller_sp`.
// May write NODE records: call with the thread's lock held.
uint32_t allocation_context(ThreadState* t, uintptr_t call_site, uintptr_t caller_sp);

// Empties the thread's tree and shadow stack (a new or reused thread state).
void reset_call_context(ThreadState* t);

// A forked child starts a new tree (the parent's nodes are in the parent's
// profile), but is still inside the functions on its shadow stack: their path is
// created again in the new tree. Call with the thread's lock held.
void rebuild_call_context_after_fork(ThreadState* t);

}  // namespace runtime
}  // namespace heaptype

#endif
