// call_site_types.hpp: what each allocation call site allocates, learned per thread.
//
// A new-expression calls operator new from one place and then reports its type
// (the `new` macro's operator*), and the typed allocator reports right after its
// own call. The type at such a call site never changes: once a thread has seen
// the type arrive for a block of a call site, the runtime names the type of every
// later block of that call site in operator new itself, and the new-expression's
// report finds it done (an inline check, no call into the runtime). One runtime
// entry per allocation.
//
// A call site starts unknown. Its first block goes on probation (the type may still
// come); when a type arrives for it the call site is typed, when the block leaves
// probation without one (freed, or pushed out by newer blocks) it is untyped. A
// typed call site that gets another type, or an untyped one that gets a type after
// all (e.g. a class's own operator new shared by several classes), is ambiguous:
// each of its blocks goes on probation and takes whatever type arrives.
//
// A memo in front of it maps (call site, calling context, size) to the thread's site
// number, so that a repeated allocation costs one probe.
#ifndef HEAPTYPE_RUNTIME_CALL_SITE_TYPES_HPP
#define HEAPTYPE_RUNTIME_CALL_SITE_TYPES_HPP

#include <cstddef>
#include <cstdint>

namespace heaptype {
namespace runtime {

enum class CallSiteState : uint8_t { kUnknown, kUntyped, kTyped, kAmbiguous };

struct CallSiteType {
  uintptr_t call_site;  // 0: an empty slot
  uintptr_t type_tag;
  uint64_t elem_size;
  uint32_t offset;      // of the objects in the block: the array cookie, or 0
  CallSiteState state;
};

struct SiteMemo {
  uintptr_t call_site;  // 0: empty
  uint64_t size;
  uintptr_t type_tag;   // 0: untyped
  uint32_t node;
  uint32_t site;
  uint32_t offset;      // of the objects in the block (typed only)
};

constexpr unsigned kMemoBits = 9;  // entries, in sets of two

struct CallSiteTypes {
  CallSiteType* slots;
  uint32_t capacity;
  uint32_t used;
  SiteMemo* memo;       // 1 << kMemoBits entries
};

// Maps the memo; false when out of memory.
bool init_call_site_types(CallSiteTypes& types);

// The entry of `call_site`, created unknown; nullptr when out of memory.
CallSiteType* call_site_type(CallSiteTypes& types, uintptr_t call_site);

// The objects in a block of `size` bytes of a typed call site; false when the size
// does not fit its type (another class's block through a shared operator new).
inline bool typed_count(const CallSiteType& c, uint64_t size, uint64_t* count) {
  if (size < c.offset || (size - c.offset) % c.elem_size != 0) return false;
  *count = (size - c.offset) / c.elem_size;
  return true;
}

// A type arrived for a block of the call site (objects at `offset` in the block).
void learn_type(CallSiteTypes& types, CallSiteType& c, uintptr_t type_tag, uint64_t elem_size, uint64_t offset);
// A block of the call site left probation without a type.
void learn_untyped(CallSiteType& c);
// A type arrived for a block committed untyped.
void learn_late_type(CallSiteTypes& types, CallSiteType& c);

// The memo's set of two entries for a (call site, context, size): two keys a program
// uses at once that hash alike both stay (one entry a key thrashed when they did).
inline SiteMemo* memo_set(CallSiteTypes& types, uintptr_t call_site, uint32_t node, uint64_t size) {
  // One multiply: a product's high bits depend on every bit below them, and the three
  // keys' differences lie in different bits (code addresses' low 20, sizes' from bit 20,
  // nodes' from bit 40).
  uint64_t h = (call_site ^ (size << 20) ^ (uint64_t{node} << 40)) * 0xC2B2AE3D27D4EB4Full;
  return &types.memo[(h >> (64 - kMemoBits + 1)) * 2];
}

// The set's entry of the key, or nullptr.
inline SiteMemo* memo_find(SiteMemo* set, uintptr_t call_site, uint32_t node, uint64_t size) {
  if (set[0].call_site == call_site && set[0].node == node && set[0].size == size) return &set[0];
  if (set[1].call_site == call_site && set[1].node == node && set[1].size == size) return &set[1];
  return nullptr;
}

// Learns `entry`: in place of `known` (the key's own entry) if there is one, else
// first in the set, the older first entry moving second.
inline void memo_learn(SiteMemo* set, SiteMemo* known, const SiteMemo& entry) {
  if (!known) {
    set[1] = set[0];
    known = &set[0];
  }
  *known = entry;
}

void reset_call_site_types(CallSiteTypes& types);
// Empties the memo: when a call site's type changes, and when the thread forgets its
// sites (a new generation, thread_state.hpp: the memo's site numbers are of that
// generation, and a site is counted under the numbers of the generation in use; the
// aggregated mode retires the others, aggregate.hpp).
void forget_memo(CallSiteTypes& types);

}  // namespace runtime
}  // namespace heaptype

#endif
