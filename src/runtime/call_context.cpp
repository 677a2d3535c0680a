#include "call_context.hpp"

#include <link.h>
#include <unwind.h>

#include <cstring>

#include "internal_memory.hpp"
#include "module_names.hpp"
#include "sanitizer.hpp"
#include "thread_state.hpp"
#include "tracker.hpp"

namespace heaptype {
namespace runtime {
namespace {

CallstackMode g_mode = CallstackMode::kAuto;

// The kept node of number `id`, or nullptr when it belongs to a forgotten generation.
inline ContextNode* kept_node(CallContext& c, uint32_t id) {
  uint32_t i = id - c.first_node;  // wraps around for older numbers
  return i < c.node_count ? &c.nodes[i] : nullptr;
}

// A new generation: the kept nodes are forgotten, numbering goes on after them.
void start_node_generation(CallContext& c) {
  c.first_node += c.node_count;
  c.node_count = 0;
  std::memset(c.child_index, 0, c.index_capacity * sizeof(uint32_t));
}

// Room for one more node: the table grows up to a generation's size, then starts over.
bool ensure_nodes(CallContext& c) {
  if (c.node_count < c.node_capacity) return true;
  if (c.node_capacity >= kNodesPerGeneration && c.child_index) {
    start_node_generation(c);
    return true;
  }
  uint32_t capacity = c.node_capacity ? c.node_capacity * 2 : 1024;
  ContextNode* nodes = static_cast<ContextNode*>(map_pages(capacity * sizeof(ContextNode), MemoryUse::kCallPaths));
  if (!nodes) return false;
  if (c.nodes) {
    std::memcpy(nodes, c.nodes, c.node_count * sizeof(ContextNode));
    unmap_pages(c.nodes, c.node_capacity * sizeof(ContextNode), MemoryUse::kCallPaths);
  }
  c.nodes = nodes;
  c.node_capacity = capacity;
  if (c.node_count == 0 && c.first_node == 0) {  // the root
    std::memset(&nodes[0], 0, sizeof(ContextNode));
    c.node_count = 1;
  }
  return true;
}

inline ChildCacheEntry& cache_entry(CallContext& c, uint32_t parent, uintptr_t function, uintptr_t call_site) {
  uint64_t h = (parent * 0x9E3779B97F4A7C15ull) ^ (function * 0xC2B2AE3D27D4EB4Full) ^ call_site;
  h ^= h >> 29;
  return c.cache[(h * 0x165667B19E3779F9ull) >> (64 - kChildCacheBits)];
}

inline uint64_t child_hash(uint32_t parent, uintptr_t function, uintptr_t call_site) {
  uint64_t h = (parent * 0x9E3779B97F4A7C15ull) ^ (function * 0xC2B2AE3D27D4EB4Full) ^ (call_site * 0x165667B19E3779F9ull);
  return h ^ (h >> 31);
}

void index_node(CallContext& c, uint32_t id) {
  const ContextNode& n = *kept_node(c, id);
  uint32_t mask = c.index_capacity - 1;
  for (uint64_t i = child_hash(n.parent, n.function, n.call_site) & mask;; i = (i + 1) & mask) {
    if (c.child_index[i] == 0) {
      c.child_index[i] = id;
      return;
    }
  }
}

bool ensure_index(CallContext& c) {
  if (c.child_index && (c.node_count + 1) * 2 <= c.index_capacity) return true;
  uint32_t capacity = c.index_capacity ? c.index_capacity * 2 : 4096;
  uint32_t* index = static_cast<uint32_t*>(map_pages(capacity * sizeof(uint32_t), MemoryUse::kCallPaths));
  if (!index) return false;
  if (c.child_index) unmap_pages(c.child_index, c.index_capacity * sizeof(uint32_t), MemoryUse::kCallPaths);
  c.child_index = index;
  c.index_capacity = capacity;
  for (uint32_t i = 0; i < c.node_count; ++i)
    if (c.first_node + i != 0) index_node(c, c.first_node + i);  // not the root
  return true;
}

// The child of `parent` for (function, call site), created and announced if new.
uint32_t child_node(ThreadState* t, uint32_t parent, uintptr_t function, uintptr_t call_site) {
  CallContext& c = t->context;
  if (!ensure_nodes(c) || !ensure_index(c)) return parent;
  ChildCacheEntry& cached = cache_entry(c, parent, function, call_site);
  if (cached.child && cached.parent == parent && cached.function == function && cached.call_site == call_site)
    return cached.child;
  ContextNode* p = kept_node(c, parent);
  if (p && p->last_found) {
    const ContextNode* hint = kept_node(c, p->last_found);
    if (hint && hint->function == function && hint->call_site == call_site) {
      cached = {function, call_site, parent, p->last_found};
      return p->last_found;
    }
  }
  uint32_t mask = c.index_capacity - 1;
  uint64_t i = child_hash(parent, function, call_site) & mask;
  for (; c.child_index[i]; i = (i + 1) & mask) {
    uint32_t child = c.child_index[i];
    const ContextNode& n = *kept_node(c, child);
    if (n.parent == parent && n.function == function && n.call_site == call_site) {
      if (p) p->last_found = child;
      cached = {function, call_site, parent, child};
      return child;
    }
  }
  uint32_t id = c.first_node + c.node_count;
  if (id == UINT32_MAX) return parent;  // numbers run out: deeper frames are not told apart
  ++c.node_count;
  ContextNode& n = *kept_node(c, id);
  n.function = function;
  n.call_site = call_site;
  n.parent = parent;
  n.last_found = 0;
  if (p) p->last_found = id;
  c.child_index[i] = id;  // the empty slot the search ended at (index_node's)
  cached = {function, call_site, parent, id};
  emit_node(t, id, parent, function, call_site);
  return id;
}

bool ensure_frames(CallContext& c) {
  if (__builtin_expect(c.frames != nullptr, 1)) return true;
  c.cache = static_cast<ChildCacheEntry*>(map_pages(kChildCacheSize * sizeof(ChildCacheEntry), MemoryUse::kCallPaths));
  if (!c.cache) return false;
  c.known_paths = static_cast<KnownPath*>(map_pages(sizeof(KnownPath) << kKnownPathBits, MemoryUse::kCallPaths));
  c.walk_path = static_cast<uintptr_t*>(map_pages((kMaxWalkedFrames + 1) * sizeof(uintptr_t), MemoryUse::kCallPaths));
  c.walk_nodes = static_cast<uint32_t*>(map_pages((kMaxWalkedFrames + 1) * sizeof(uint32_t), MemoryUse::kCallPaths));
  for (WalkStep*& steps : c.walk_memo.steps)
    steps = static_cast<WalkStep*>(map_pages(kMaxWalkSteps * sizeof(WalkStep), MemoryUse::kCallPaths));
  c.frames = static_cast<CallFrame*>(map_pages(kMaxShadowDepth * sizeof(CallFrame), MemoryUse::kCallPaths));
  return c.frames && c.walk_path && c.walk_nodes && c.known_paths && c.walk_memo.steps[0] && c.walk_memo.steps[1];
}

inline uint32_t top_node(const CallContext& c) {
  uint32_t stored = c.depth < kMaxShadowDepth ? c.depth : kMaxShadowDepth;
  return stored ? c.frames[stored - 1].node : 0;
}

// Pops frames of functions that are gone: their stack pointer lies below `sp`.
inline void prune_below(CallContext& c, uintptr_t sp) {
  while (c.depth && c.depth <= kMaxShadowDepth && c.frames[c.depth - 1].stack_pointer < sp) --c.depth;
}

// A stack larger than this is not the thread's own: a signal handler running on an
// alternate stack walks nothing.
constexpr uintptr_t kMaxStackSpan = uintptr_t{1} << 30;

// Linux maps nothing below vm.mmap_min_addr (64 KiB by default): a "return address"
// there is data read from a frame that code without frame pointers laid out its own way.
constexpr uintptr_t kLowestCode = uintptr_t{1} << 16;

// Whether a loaded object is one of the libraries a thread or the process starts in
// (libc, the loader, libstdc++ for std::thread): by its file name.
bool starts_threads(const char* path) {
  for (const char* prefix : {"libc.so", "libc-", "ld-linux", "ld-", "libpthread", "libstdc++"})
    if (file_name_starts_with(path, prefix)) return true;
  return false;
}

// The executable segments of the object holding `data` (the runtime's own code:
// g_framed_code) and of the libraries threads start in (g_start_code).
int note_code(dl_phdr_info* info, size_t, void* data) {
  uintptr_t here = reinterpret_cast<uintptr_t>(data);
  bool starts = info->dlpi_name && starts_threads(info->dlpi_name);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_LOAD || !(segment.p_flags & PF_X)) continue;
    uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    if (here - start < segment.p_memsz) {
      g_framed_code = start;
      g_framed_code_bytes = segment.p_memsz;
    } else if (starts && g_start_code_count < kMostStartCode) {
      g_start_code[g_start_code_count++] = {start, segment.p_memsz};
    }
  }
  return 0;
}

// Called for each caller at kKeptFramesAtLeast or more (`kept` before it), `ra` read at
// `slot`; true when the walk is full (a caller past kMaxWalkedFrames). Only deep walks
// come here; its state is the thread's CutState, in memory: kept in locals, it took
// registers from every walk's loops (alloc_bench, callgrind: +6 instructions an
// allocation; +20 with this function out of line, a call in those loops; +2 so).
__attribute__((always_inline)) inline bool deep_caller(CutState& cut, uint32_t kept, uintptr_t slot, uintptr_t ra) {
  if (kept == kMaxWalkedFrames) return true;
  if (kept == kKeptFramesAtLeast) cut.anchored = 0;
  if (kept == kKeptFramesAtFirst) cut.at_first = {slot, ra};
  if (!cut.anchored && slot == cut.anchor.slot && ra == cut.anchor.return_address) cut.anchored = kept;
  return false;
}

// A walk with more callers than it keeps: cut before the thread's anchor if it passed
// it, else after kKeptFramesAtFirst callers, whose next becomes the anchor. The marker
// goes in the slot after the callers kept, as the path's outermost "return address".
// (`sum` still counts the callers left out: it serves the known paths, which hold no
// path this deep.)
inline int cut_walk(uintptr_t* out, CutState& cut) {
  uint32_t kept = cut.anchored;
  if (!kept) {
    kept = kKeptFramesAtFirst;
    cut.anchor = cut.at_first;
  }
  out[kept] = kWalkCut;
  return static_cast<int>(kept) + 1;
}

// Words copied and compared: with memcpy and memcmp, except in a runtime built for
// ThreadSanitizer. A thread's tables (its known paths, its walk's log) pass to the next
// thread that starts after it ends (its state is reused, handed over under a lock whose
// turns ThreadSanitizer is told of). The runtime is not built with the sanitizer, but
// libc's memcpy and memcmp are its interceptors: built for ThreadSanitizer, the runtime
// copies and compares word by word, unseen, like every other access to its own tables.
// (Through the interceptors, TSan reported the first owner's copy of a path and the next
// owner's as a race in about one run in twenty of tests/cpp/callpaths_known.cpp, with
// annotations on the hand-over too.)
#ifdef HEAPTYPE_SANITIZER
inline bool same_words(const uintptr_t* a, const uintptr_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    asm volatile("" ::: "memory");  // a loop, not a call to memcmp
    if (a[i] != b[i]) return false;
  }
  return true;
}
inline void copy_words(uintptr_t* to, const uintptr_t* from, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    asm volatile("" ::: "memory");  // a loop, not a call to memcpy
    to[i] = from[i];
  }
}
inline void copy_steps(WalkStep* to, const WalkStep* from, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    asm volatile("" ::: "memory");
    to[i] = from[i];
  }
}
#else
// memcmp compares a word a step where a loop took five instructions (callgrind).
inline bool same_words(const uintptr_t* a, const uintptr_t* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(uintptr_t)) == 0;
}
inline void copy_words(uintptr_t* to, const uintptr_t* from, size_t n) {
  std::memcpy(to, from, n * sizeof(uintptr_t));
}
inline void copy_steps(WalkStep* to, const WalkStep* from, size_t n) { std::memcpy(to, from, n * sizeof(WalkStep)); }
#endif

// The steps a walk takes, logged for the next walk to replay.
struct WalkLog {
  WalkStep* steps;
  uint32_t count;
  bool whole;  // every step is in it
};

__attribute__((always_inline)) inline void log_step(WalkLog& log, const WalkStep& step) {
  if (__builtin_expect(log.count < kMaxWalkSteps, 1))
    log.steps[log.count++] = step;
  else
    log.whole = false;
}

// The steps [from, to) of the last walk, replayed by this one: logged at once, not one
// by one as they were replayed (clang-tidy's walks replay ~45 steps each; a step logged
// alone cost eight instructions).
__attribute__((always_inline)) inline void log_steps(WalkLog& log, const WalkStep* from, const WalkStep* to) {
  uint32_t n = static_cast<uint32_t>(to - from), room = kMaxWalkSteps - log.count;
  if (n > room) {
    n = room;
    log.whole = false;
  }
  copy_steps(log.steps + log.count, from, n);
  log.count += n;
}

// The last walk's steps, as far as this walk may replay them: taken under the same
// frame rules, the same end of the thread's start and the same top of the stack.
struct Replay {
  const WalkStep* steps;
  uint32_t count;  // 0: nothing to replay
  uint32_t next;   // the first step not below the position this walk reached (or replayed)
};

// Whether the words `s` read still hold what they held then.
inline bool step_holds(const WalkStep& s) {
  const uintptr_t* words;
  switch (s.kind) {
    case StepKind::kChain:
    case StepKind::kSkip:
      words = reinterpret_cast<const uintptr_t*>(s.sp);
      return words[0] == s.next && words[1] == s.pc;
    case StepKind::kLeave:
      words = reinterpret_cast<const uintptr_t*>(s.sp - 2 * sizeof(uintptr_t));
      return words[0] == s.next && words[1] == s.pc;
    case StepKind::kRule:
      return reinterpret_cast<const uintptr_t*>(s.sp)[-1] == s.pc &&
             (s.rbp_from == kRbpKept ||
              *reinterpret_cast<const uintptr_t*>(s.sp + static_cast<uintptr_t>(static_cast<intptr_t>(s.rbp_from))) ==
                  s.next);
  }
  return false;
}

// The last walk's step that left it in the state `step` just left this walk in, or
// nullptr. Both walks go up the stack: positions only grow, and the search goes on
// from where it stood.
__attribute__((always_inline)) inline const WalkStep* same_state_before(Replay& r, const WalkStep& step) {
  while (r.next < r.count && r.steps[r.next].sp < step.sp) ++r.next;
  for (uint32_t i = r.next; i < r.count && r.steps[i].sp == step.sp; ++i) {
    const WalkStep& s = r.steps[i];
    if (s.next == step.next && s.pc == step.pc && in_rule_state(s.kind) == in_rule_state(step.kind)) return &s;
  }
  return nullptr;
}

// Logs `step`; true when the last walk was in the state it leaves this one in
// (`matched`: that walk's step), from where the walk replays.
__attribute__((always_inline)) inline bool log_and_match(WalkLog& log, Replay& replay, const WalkStep& step,
                                                         const WalkStep*& matched) {
  log_step(log, step);
  return replay.count && (matched = same_state_before(replay, step)) != nullptr;
}

// The return addresses of the callers of the function whose frame is `frame` (an
// allocation function: its own return address is the call site), innermost first.
// Functions without frame pointers (the allocation made inside a system library, or
// such a library's code between the program's functions) are stepped over by their
// frame rules; the others by the frame-pointer chain. `out` holds kMaxWalkedFrames + 1:
// a stack with more callers keeps the innermost (cut_walk) and kWalkCut after them. Every
// word read lies above the stack pointer of the frame before it and below the top of the
// thread's stack (`high`): memory that is mapped, whatever a register that code
// without frame pointers used for something else held. `rule_steps` counts the frames
// stepped over by rules.
//
// kReplay: the walk logs its steps, and where it reaches a state the last walk was in
// (a few frames up, most walks: two allocations share most of their callers), it
// takes the last walk's steps from there for as long as the words each read hold the
// same values. Every decision of a walk is a function of its state, the words it
// reads, the rules (unchanged: their epoch), the thread's start (last_end) and the top
// of the stack; of those only the test of a return address against the stack below
// depends on this walk's own frame, and it is made again. Where a word changed, the
// walk goes on by itself from the last step that held; its end it always takes
// itself.
template <bool kReplay>
__attribute__((always_inline)) inline int walk_steps(FrameRules& rules, CutState& cut, uintptr_t frame,
                                                     uintptr_t high, uintptr_t* out, uintptr_t& sum,
                                                     uint32_t& rule_steps, WalkLog& log, Replay& replay) {
  const uintptr_t limit = high - 2 * sizeof(uintptr_t);
  const uintptr_t stack_span = high - frame;
  const uintptr_t framed = g_framed_code, framed_bytes = g_framed_code_bytes;  // see in_framed_code
  const uintptr_t* hook = reinterpret_cast<const uintptr_t*>(frame);
  // pc: a return address into a function; sp: its stack pointer at that call; rbp:
  // its frame pointer register then. In the frame-pointer chain: the frame record
  // read last (below) and the next one (fp).
  uintptr_t sp = frame + 2 * sizeof(uintptr_t), rbp = hook[0], pc = hook[1];
  uintptr_t below, fp;
  uintptr_t* at = out;
  uintptr_t* const deep_from = out + kKeptFramesAtLeast;
  const WalkStep* matched = nullptr;
  // Whether the caller `ra`, read at `slot`, is one too many: the walk is cut there (cut_walk).
  auto full = [&](uintptr_t slot, uintptr_t ra) __attribute__((always_inline)) {
    return __builtin_expect(at >= deep_from, 0) && deep_caller(cut, static_cast<uint32_t>(at - out), slot, ra);
  };

rule_frames:
  for (;;) {  // functions without a frame pointer, by their rules
    FrameRule rule = frame_rule(rules, pc);
    if (rule.kind == FrameKind::kFramePointer) break;
    if (rule.kind == FrameKind::kEnd) rules.last_end = pc;
    uintptr_t cfa;
    if (rule.kind == FrameKind::kStackOffset || rule.kind == FrameKind::kRbpOffset) {
      cfa = (rule.kind == FrameKind::kStackOffset ? sp : rbp) + static_cast<uintptr_t>(rule.cfa_offset);
      if (cfa <= sp || cfa > limit) return static_cast<int>(at - out);
      if (rule.saved_rbp != kRbpKept) {
        uintptr_t saved = cfa + static_cast<uintptr_t>(static_cast<intptr_t>(rule.saved_rbp));
        if (saved < sp || saved > limit) return static_cast<int>(at - out);
        rbp = *reinterpret_cast<const uintptr_t*>(saved);
      }
    } else if (rule.kind == FrameKind::kRbpSlot) {
      // A realigned frame: the CFA and the caller's rbp are words near rbp, in the frame.
      uintptr_t cfa_slot = rbp + static_cast<uintptr_t>(static_cast<intptr_t>(rule.cfa_offset));
      uintptr_t rbp_slot = rbp + static_cast<uintptr_t>(static_cast<intptr_t>(rule.saved_rbp));
      if (cfa_slot < sp || cfa_slot > limit || rbp_slot < sp || rbp_slot > limit) return static_cast<int>(at - out);
      cfa = *reinterpret_cast<const uintptr_t*>(cfa_slot);
      if (cfa <= sp || cfa > limit) return static_cast<int>(at - out);
      rbp = *reinterpret_cast<const uintptr_t*>(rbp_slot);
      if (kReplay) log.whole = false;  // its CFA was read too: such a walk is not replayed (rare: main's frame)
    } else {
      return static_cast<int>(at - out);  // kOpaque, kEnd: the walk ends here
    }
    pc = reinterpret_cast<const uintptr_t*>(cfa)[-1];
    if (pc < kLowestCode) return static_cast<int>(at - out);
    if (full(cfa - sizeof(uintptr_t), pc)) return cut_walk(out, cut);
    *at++ = pc;
    sum += pc;
    sp = cfa;
    ++rule_steps;
    if (kReplay &&
        log_and_match(log, replay,
                      {sp, rbp, pc, rule.kind == FrameKind::kRbpSlot ? kRbpKept : rule.saved_rbp, StepKind::kRule},
                      matched))
      goto replay_steps;
  }
  // The frame-pointer chain: fp in (below, limit], each frame above the one before.
  below = sp - 1;
  fp = rbp;
chain_frames:
  for (;;) {
    if (fp <= below || fp > limit) return static_cast<int>(at - out);
    const uintptr_t* f = reinterpret_cast<const uintptr_t*>(fp);
    uintptr_t ra = f[1];
    below = fp;
    fp = f[0];
    // A return into the framed module (most of them): code, so none of the tests
    // below can end the walk there, and its caller keeps a frame pointer too.
    if (__builtin_expect(ra - framed < framed_bytes, 1)) {
      if (full(below + sizeof(uintptr_t), ra)) return cut_walk(out, cut);
      *at++ = ra;
      sum += ra;
      if (kReplay && log_and_match(log, replay, {below, fp, ra, kRbpKept, StepKind::kChain}, matched))
        goto replay_steps;
      continue;
    }
    // Code that uses rbp for its own ends the chain (libffi's call frames, code
    // built without frame pointers): a "return address" inside the stack is data.
    if (!ra || ra - frame < stack_span) return static_cast<int>(at - out);
    // So is one in the first pages, read where such code kept rbp pointing into a
    // frame of its caller: the chain goes on from there, without that word.
    if (ra < kLowestCode) {
      if (kReplay && log_and_match(log, replay, {below, fp, ra, kRbpKept, StepKind::kSkip}, matched))
        goto replay_steps;
      continue;
    }
    // Full: the rule loop above may have filled it (its last frame's caller keeps a
    // frame pointer), so the test comes before the write.
    if (full(below + sizeof(uintptr_t), ra)) return cut_walk(out, cut);
    *at++ = ra;
    sum += ra;
    // A return into code outside the framed module: its rule decides the next step
    // (its frame record, or its own rule if it keeps no frame pointer).
    if (ra == rules.last_end) return static_cast<int>(at - out);  // the thread's start, as always
    pc = ra;
    sp = below + 2 * sizeof(uintptr_t);
    rbp = fp;
    if (kReplay && log_and_match(log, replay, {sp, rbp, pc, kRbpKept, StepKind::kLeave}, matched))
      goto replay_steps;
    goto rule_frames;
  }

replay_steps:
  if (kReplay) {
    // The steps after the one matched, each where its words hold and its return
    // address passes the test that depends on this walk's frame. Where one does not,
    // the walk goes on by itself and may meet the last walk's states again further up
    // (a frame that differs in the middle of the stack).
    const WalkStep* const last = replay.steps + replay.count;
    const WalkStep* resume = matched;
    for (const WalkStep* s = matched + 1; s < last; ++s) {
      if (!step_holds(*s)) break;
      if (s->kind == StepKind::kSkip || s->kind == StepKind::kLeave) {
        if (!s->pc || s->pc - frame < stack_span) break;
      }
      if (s->kind != StepKind::kSkip) {
        // The word s->pc was read from: a frame record's second, or the one below a CFA.
        uintptr_t slot = s->kind == StepKind::kChain ? s->sp + sizeof(uintptr_t) : s->sp - sizeof(uintptr_t);
        if (full(slot, s->pc)) {
          log_steps(log, matched + 1, s);
          return cut_walk(out, cut);
        }
        *at++ = s->pc;
        sum += s->pc;
      }
      rule_steps += s->kind == StepKind::kRule;
      resume = s;
    }
    log_steps(log, matched + 1, resume + 1);
    replay.next = static_cast<uint32_t>(resume - replay.steps) + 1;
    if (in_rule_state(resume->kind)) {
      pc = resume->pc;
      sp = resume->sp;
      rbp = resume->next;
      goto rule_frames;
    }
    below = resume->sp;
    fp = resume->next;
    goto chain_frames;
  }
  return 0;  // not reached
}

// The walk, replaying the last one where this thread's walks are stepped over by
// rules, and logging its own steps for the next.
__attribute__((always_inline)) inline int walk_callers(CallContext& c, uintptr_t frame, uintptr_t high,
                                                       uintptr_t* out, uintptr_t& sum) {
  if (!high || frame >= high || high - frame > kMaxStackSpan) return 0;
  FrameRules& rules = c.frame_rules;
  WalkMemo& memo = c.walk_memo;
  uint32_t rule_steps = 0;
  WalkLog log = {nullptr, 0, false};
  Replay replay = {nullptr, 0, 0};
  if (__builtin_expect(memo.rule_steps < kReplayFromRuleSteps, 1)) {
    int depth = walk_steps<false>(rules, c.cut, frame, high, out, sum, rule_steps, log, replay);
    memo.rule_steps = rule_steps;
    memo.count = 0;
    return depth;
  }
  const uint32_t epoch = rules.epoch;
  const uintptr_t last_end = rules.last_end;
  log = {memo.steps[memo.last ^ 1], 0, true};
  replay = {memo.steps[memo.last], 0, 0};
  if (memo.rules_epoch == epoch && memo.last_end == last_end && memo.high == high) replay.count = memo.count;
  int depth = walk_steps<true>(rules, c.cut, frame, high, out, sum, rule_steps, log, replay);
  memo.last ^= 1;
  memo.count = log.whole && rules.epoch == epoch ? log.count : 0;  // its steps all under one set of rules
  memo.rule_steps = rule_steps;
  memo.rules_epoch = epoch;
  memo.last_end = last_end;
  memo.high = high;
  return depth;
}

// The known paths' hash: of the path's ends, its depth and the sum of its return
// addresses (which the walk adds up as it goes: an instruction a frame), so that the
// paths of a recursion, which often share both ends and the depth and differ between
// them, take different slots.
inline uint64_t path_hash(const uintptr_t* ras, uint32_t depth, uintptr_t sum) {
  if (!depth) return 0;
  return ((ras[0] * 0x9E3779B97F4A7C15ull) ^ (ras[depth - 1] + depth) ^ (sum * 0x165667B19E3779F9ull)) *
         0xC2B2AE3D27D4EB4Full;
}

// The unwinder's backtrace holds the runtime's own frames before the call site (a
// handful), then the callers a walk keeps, and one slot to learn that more follow.
constexpr int kUnwoundFrames = kMaxWalkedFrames + 32;

struct UnwindState {
  uintptr_t* out;
  int n;
  int max;
  bool more;  // a frame came past `max`
};

_Unwind_Reason_Code collect_frame(struct _Unwind_Context* context, void* arg) {
  UnwindState* s = static_cast<UnwindState*>(arg);
  uintptr_t ip = _Unwind_GetIP(context);
  if (!ip) return _URC_END_OF_STACK;
  if (s->n >= s->max) {
    s->more = true;
    return _URC_END_OF_STACK;
  }
  s->out[s->n++] = ip;
  return _URC_NO_REASON;
}

// How many frames, from the outermost in, the previous walk's path (`outer_first`, of
// `known` frames) shares with `ras` (innermost first, `depth` frames): four at a time,
// then one at a time (clang-tidy's paths, 60 frames deep, were compared a frame at a
// time in 7 instructions each).
inline uint32_t shared_outer_frames(const uintptr_t* outer_first, uint32_t known, const uintptr_t* ras,
                                    uint32_t depth) {
  const uint32_t limit = depth < known ? depth : known;
  const uintptr_t* outermost = ras + depth - 1;  // ras read backwards from here
  uint32_t same = 0;
  while (same + 4 <= limit) {
    const uintptr_t* w = outer_first + same;
    const uintptr_t* r = outermost - same;
    if (((w[0] ^ r[0]) | (w[1] ^ r[-1]) | (w[2] ^ r[-2]) | (w[3] ^ r[-3])) != 0) break;
    same += 4;
  }
  while (same < limit && outer_first[same] == outermost[-static_cast<ptrdiff_t>(same)]) ++same;
  return same;
}

// The node of the path of return addresses `ras` (innermost first), outside in.
// The previous path's nodes serve the frames both share from the outermost in.
uint32_t node_of_path(ThreadState* t, const uintptr_t* ras, uint32_t depth) {
  CallContext& c = t->context;
  uint32_t same = shared_outer_frames(c.walk_path, c.walk_depth, ras, depth);
  uint32_t node = same ? c.walk_nodes[same - 1] : 0;
  for (uint32_t k = same; k < depth; ++k) {
    node = child_node(t, node, 0, ras[depth - 1 - k]);
    c.walk_path[k] = ras[depth - 1 - k];
    c.walk_nodes[k] = node;
  }
  c.walk_depth = depth;
  return node;
}

// The node of the unwinder's backtrace (innermost first, `ras` holding kUnwoundFrames + 1),
// whose callers start after the allocation's own call site. As with frame pointers, a path
// keeps kMaxWalkedFrames callers and says so when the stack had more (`more`: the
// backtrace stopped before its end).
uint32_t node_from_backtrace(ThreadState* t, uintptr_t call_site, uintptr_t* ras, int n, bool more) {
  int start = 0;
  while (start < n && ras[start] != call_site) ++start;
  if (start == n) return 0;
  uintptr_t* callers = ras + start + 1;
  int depth = n - 1 - start;
  if (more || depth > kMaxWalkedFrames) {
    if (depth > kMaxWalkedFrames) depth = kMaxWalkedFrames;
    callers[depth++] = kWalkCut;  // within ras: depth <= n - 1 - start
  }
  return node_of_path(t, callers, static_cast<uint32_t>(depth));
}

// The return addresses of the callers of the function whose frame is `frame`, stepped
// over by their frame rules alone, each read from the function's call frame information
// (or learned from the unwinder's own steps): the words the unwinder would read, and no
// other. For a stack whose bounds are unknown (a coroutine's): a frame pointer is
// followed only where the CFI says the function keeps its frame record there, never on a
// guess, and the walk ends where a rule is missing, as the unwinder does. -1 when the
// rule table has no memory (the unwinder walks instead).
int unwind_by_rules(FrameRules& rules, uintptr_t frame, uintptr_t* out, uintptr_t& sum) {
  if (__builtin_expect(!rules.slots, 0)) frame_rule(rules, 0);  // the table, at the first walk
  if (!rules.slots) return -1;
  const uintptr_t* hook = reinterpret_cast<const uintptr_t*>(frame);  // the runtime's own frame record
  uintptr_t sp = frame + 2 * sizeof(uintptr_t), rbp = hook[0], pc = hook[1];
  int depth = 0;
  for (;;) {
    FrameRule rule = frame_rule(rules, pc);
    uintptr_t cfa, saved = 0;
    bool reads_rbp = true;
    switch (rule.kind) {
      case FrameKind::kFramePointer:
        if (rule.guessed) return depth;
        cfa = rbp + 2 * sizeof(uintptr_t);
        saved = rbp;
        break;
      case FrameKind::kStackOffset:
      case FrameKind::kRbpOffset:
        cfa = (rule.kind == FrameKind::kStackOffset ? sp : rbp) + static_cast<uintptr_t>(rule.cfa_offset);
        reads_rbp = rule.saved_rbp != kRbpKept;
        if (reads_rbp) saved = cfa + static_cast<uintptr_t>(static_cast<intptr_t>(rule.saved_rbp));
        break;
      case FrameKind::kRbpSlot:
        cfa = *reinterpret_cast<const uintptr_t*>(rbp + static_cast<uintptr_t>(static_cast<intptr_t>(rule.cfa_offset)));
        saved = rbp + static_cast<uintptr_t>(static_cast<intptr_t>(rule.saved_rbp));
        break;
      default:
        return depth;  // kOpaque, kEnd
    }
    if (cfa <= sp) return depth;
    if (reads_rbp) rbp = *reinterpret_cast<const uintptr_t*>(saved);
    pc = reinterpret_cast<const uintptr_t*>(cfa)[-1];
    if (pc < kLowestCode || pc == rules.last_end) return depth;
    if (depth == kMaxWalkedFrames) {
      out[depth++] = kWalkCut;
      return depth;
    }
    out[depth++] = pc;
    sum += pc;
    sp = cfa;
  }
}

// The node of the unwinder's walk of the stack, from the call frame information alone.
uint32_t unwound_context(ThreadState* t, uintptr_t call_site) {
  uintptr_t ras[kUnwoundFrames + 1];
  UnwindState s = {ras, 0, kUnwoundFrames, false};
  _Unwind_Backtrace(collect_frame, &s);
  return node_from_backtrace(t, call_site, ras, s.n, s.more);
}

// The walk of a frame the thread's first walk meets (its stack's bounds are learned
// then), or of one off the thread's own stack: out of the common walk's way. The
// number of callers in `ras`, or -1 when the unwinder's walk made the node (`*node`).
__attribute__((noinline, cold)) int walk_elsewhere(ThreadState* t, uintptr_t call_site, uintptr_t frame,
                                                   uintptr_t* ras, uintptr_t& sum, uint32_t* node) {
  if (!t->stack.low_known) find_stack_low(t);
  if (frame >= t->stack.low && frame < t->stack.high)
    return walk_callers(t->context, frame, t->stack.high, ras, sum);
  int depth = unwind_by_rules(t->context.frame_rules, frame, ras, sum);
  if (depth < 0) *node = unwound_context(t, call_site);
  return depth;
}

// The node of the stack above an allocation function's frame, through the table
// of known paths. A frame off the thread's own stack is on one the program made (a
// coroutine's, a fiber's): its bounds are unknown, and a frame pointer read there (the
// garbage a context switch left in rbp at the bottom of such a stack) could lead
// anywhere below the thread's stack, unmapped memory included; it is stepped over by
// frame rules alone (unwind_by_rules), which read only what the call frame information
// says, as the unwinder does.
__attribute__((always_inline)) inline uint32_t walked_context(ThreadState* t, uintptr_t call_site, uintptr_t frame) {
  CallContext& c = t->context;
  uintptr_t ras[kMaxWalkedFrames + 1];
  uintptr_t sum = 0;
  uint32_t depth;
  if (__builtin_expect(frame < t->stack.walk_low || frame >= t->stack.high, 0)) {
    uint32_t node = 0;
    int walked = walk_elsewhere(t, call_site, frame, ras, sum, &node);
    if (walked < 0) return node;
    depth = static_cast<uint32_t>(walked);
  } else {
    depth = static_cast<uint32_t>(walk_callers(c, frame, t->stack.high, ras, sum));
  }
  if (depth > kKnownPathFrames) return node_of_path(t, ras, depth);
  uint64_t hash = path_hash(ras, depth, sum);
  KnownPath& known = c.known_paths[hash >> (64 - kKnownPathBits)];
  if (known.hash == hash && known.depth == depth && same_words(known.return_addresses, ras, depth))
    return known.node;
  uint32_t node = node_of_path(t, ras, depth);
  known.hash = hash;
  known.depth = depth;
  known.node = node;
  copy_words(known.return_addresses, ras, depth);
  return node;
}

}  // namespace

bool g_hooks_enabled = true;
bool g_contexts_enabled = true;

void set_callstack_mode(CallstackMode mode) {
  // dl_iterate_phdr allocates nothing (the profile writer asks it at the same moment).
  if (!g_framed_code_bytes) dl_iterate_phdr(note_code, reinterpret_cast<void*>(&allocation_context));
  g_mode = mode;
  g_hooks_enabled = mode == CallstackMode::kAuto || mode == CallstackMode::kInstrument;
  g_contexts_enabled = mode != CallstackMode::kNone;
}
CallstackMode callstack_mode() { return g_mode; }

uint32_t allocation_context(ThreadState* t, uintptr_t call_site, uintptr_t frame) {
  CallContext& c = t->context;
  switch (g_mode) {
    case CallstackMode::kNone:
      return 0;
    case CallstackMode::kAuto:
    case CallstackMode::kInstrument:
      if (c.hooks_seen) {
        prune_below(c, frame + 2 * sizeof(uintptr_t));  // the caller's stack pointer at the call
        return top_node(c);
      }
      if (g_mode == CallstackMode::kInstrument) return 0;
      [[fallthrough]];
    case CallstackMode::kFramePointer:
      if (__builtin_expect(!c.frames, 0) && !ensure_frames(c)) return 0;
      return walked_context(t, call_site, frame);
    case CallstackMode::kUnwind:
      if (!ensure_frames(c)) return 0;
      return unwound_context(t, call_site);
  }
  return 0;
}

void rebuild_call_context_after_fork(ThreadState* t) {
  CallContext& c = t->context;
  uint32_t depth = c.depth;
  reset_call_context(t);
  c.depth = depth;
  uint32_t stored = depth < kMaxShadowDepth ? depth : kMaxShadowDepth;
  uint32_t parent = 0;
  for (uint32_t d = 0; d < stored; ++d) {
    CallFrame& f = c.frames[d];
    f.parent = parent;
    f.node = child_node(t, parent, f.function, f.call_site);
    parent = f.node;
  }
}

void reset_call_context(ThreadState* t) {
  CallContext& c = t->context;
  c.depth = 0;
  c.walk_depth = 0;
  c.cut.anchor = {0, 0};
  c.walk_memo.count = 0;
  reset_frame_rules(c.frame_rules);
  if (c.known_paths) std::memset(c.known_paths, 0, sizeof(KnownPath) << kKnownPathBits);
  c.first_node = 0;
  c.node_count = c.nodes ? 1 : 0;
  if (c.child_index) std::memset(c.child_index, 0, c.index_capacity * sizeof(uint32_t));
  if (c.nodes) std::memset(&c.nodes[0], 0, sizeof(ContextNode));
  if (c.cache) std::memset(c.cache, 0, kChildCacheSize * sizeof(ChildCacheEntry));
}

}  // namespace runtime
}  // namespace heaptype

namespace rt = heaptype::runtime;

namespace heaptype {
namespace runtime {
namespace {

// The enter hook's slow path: first use on a thread, stale frames to drop, a
// call not seen at this depth just before.
__attribute__((no_instrument_function, noinline)) void enter_slow(uintptr_t function, uintptr_t call_site,
                                                                   uintptr_t sp) {
  if (!runtime_active() || !g_hooks_enabled) return;
  ThreadState* t = this_thread_state();
  if (!t || t->busy) return;  // a signal handler inside the runtime: its NODE records would interleave
  CallContext& c = t->context;
  if (c.in_hook || !ensure_frames(c)) return;
  c.in_hook = true;
  c.hooks_seen = true;
  // Frames below this function's stack pointer were left without an exit. (Equal
  // is not enough: a function inlined into its caller shares the caller's.)
  prune_below(c, sp);
  if (c.depth < kMaxShadowDepth) {
    uint32_t parent = top_node(c);
    t->busy = true;
    uint32_t node = child_node(t, parent, function, call_site);
    t->busy = false;
    end_event(t);
    if (__atomic_load_n(&t->pending_count, __ATOMIC_RELAXED)) drain_pending(t);  // a signal handler's events
    c.frames[c.depth] = {function, call_site, sp, node, parent};
  }
  ++c.depth;
  c.in_hook = false;
}

}  // namespace
}  // namespace runtime
}  // namespace heaptype

extern "C" {

__attribute__((visibility("default"), no_instrument_function)) void __cyg_profile_func_enter(void* function,
                                                                                              void* call_site) {
  uintptr_t fn = reinterpret_cast<uintptr_t>(function), cs = reinterpret_cast<uintptr_t>(call_site);
  uintptr_t sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) + 16;
  rt::ThreadState* t = rt::tls_thread_state;
  if (__builtin_expect(!t || !t->context.frames || t->context.in_hook, 0)) return rt::enter_slow(fn, cs, sp);
  rt::note_stack_depth(t, sp);
  rt::CallContext& c = t->context;
  uint32_t d = c.depth;
  if (__builtin_expect(d >= rt::kMaxShadowDepth, 0)) {
    ++c.depth;
    return;
  }
  rt::CallFrame* below = d ? &c.frames[d - 1] : nullptr;
  if (below && below->stack_pointer < sp) return rt::enter_slow(fn, cs, sp);  // stale frames
  uint32_t parent = below ? below->node : 0;
  rt::CallFrame& f = c.frames[d];
  if (f.function == fn && f.call_site == cs && f.parent == parent && f.node) {
    f.stack_pointer = sp;  // the same call as the last one at this depth
    c.depth = d + 1;
    return;
  }
  // A call this node made before, found in the thread's child cache.
  const rt::ChildCacheEntry& cached = rt::cache_entry(c, parent, fn, cs);
  if (cached.child && cached.parent == parent && cached.function == fn && cached.call_site == cs) {
    f = {fn, cs, sp, cached.child, parent};
    c.depth = d + 1;
    return;
  }
  rt::enter_slow(fn, cs, sp);
}

__attribute__((visibility("default"), no_instrument_function)) void __cyg_profile_func_exit(void* function,
                                                                                             void*) {
  rt::ThreadState* t = rt::tls_thread_state;
  if (!t) return;
  rt::CallContext& c = t->context;
  if (c.in_hook || !c.depth) return;
  if (c.depth > rt::kMaxShadowDepth) {
    --c.depth;
    return;
  }
  uintptr_t fn = reinterpret_cast<uintptr_t>(function);
  if (__builtin_expect(c.frames[c.depth - 1].function == fn, 1)) {
    --c.depth;
    return;
  }
  // An exit hook was skipped (longjmp, or unwinding without exit hooks): find this
  // function's frame and pop everything above it too.
  for (uint32_t d = c.depth - 1; d > 0; --d) {
    if (c.frames[d - 1].function == fn) {
      c.depth = d - 1;
      return;
    }
  }
}

}  // extern "C"
