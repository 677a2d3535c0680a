#include "call_site_types.hpp"

#include <cstring>

#include "internal_memory.hpp"

namespace heaptype {
namespace runtime {
namespace {

inline size_t slot_of(uintptr_t call_site, uint32_t capacity) {
  return static_cast<size_t>((call_site * 0x9E3779B97F4A7C15ull) >> 32) & (capacity - 1);
}

bool grow(CallSiteTypes& types) {
  // A small start (2 KiB): a thread of a few call sites touches one page for them.
  uint32_t capacity = types.capacity ? types.capacity * 2 : 64;
  // A grown table is touched all over by the rehash: its pages made present at once
  // cost half of faulting them in one by one.
  size_t bytes = capacity * sizeof(CallSiteType);
  CallSiteType* slots = static_cast<CallSiteType*>(types.capacity ? map_pages_present(bytes, MemoryUse::kTypes)
                                                                   : map_pages(bytes, MemoryUse::kTypes));
  if (!slots) return false;
  for (uint32_t i = 0; i < types.capacity; ++i) {
    const CallSiteType& old = types.slots[i];
    if (!old.call_site) continue;
    size_t j = slot_of(old.call_site, capacity);
    while (slots[j].call_site) j = (j + 1) & (capacity - 1);
    slots[j] = old;
  }
  unmap_pages(types.slots, types.capacity * sizeof(CallSiteType), MemoryUse::kTypes);
  types.slots = slots;
  types.capacity = capacity;
  return true;
}

}  // namespace

// The memo holds typed and untyped call sites only: forget it when one changes.
void forget_memo(CallSiteTypes& types) {
  if (types.memo) std::memset(types.memo, 0, sizeof(SiteMemo) << kMemoBits);
}

bool init_call_site_types(CallSiteTypes& types) {
  if (!types.memo) types.memo = static_cast<SiteMemo*>(map_pages(sizeof(SiteMemo) << kMemoBits, MemoryUse::kTypes));
  return types.memo != nullptr;
}

CallSiteType* call_site_type(CallSiteTypes& types, uintptr_t call_site) {
  if ((types.used + 1) * 4 > types.capacity * 3 && !grow(types)) return nullptr;
  uint32_t mask = types.capacity - 1;
  for (size_t i = slot_of(call_site, types.capacity);; i = (i + 1) & mask) {
    CallSiteType& c = types.slots[i];
    if (c.call_site == call_site) return &c;
    if (c.call_site) continue;
    c = {call_site, 0, 0, 0, CallSiteState::kUnknown};
    ++types.used;
    return &c;
  }
}

void learn_type(CallSiteTypes& types, CallSiteType& c, uintptr_t type_tag, uint64_t elem_size, uint64_t offset) {
  if (c.state == CallSiteState::kUnknown && elem_size && offset <= 0xffffffffu) {
    c.type_tag = type_tag;
    c.elem_size = elem_size;
    c.offset = static_cast<uint32_t>(offset);
    c.state = CallSiteState::kTyped;
    return;
  }
  bool same = c.state == CallSiteState::kTyped && c.type_tag == type_tag && c.elem_size == elem_size &&
              c.offset == offset;
  if (!same && c.state != CallSiteState::kAmbiguous) {
    c.state = CallSiteState::kAmbiguous;
    forget_memo(types);
  }
}

void learn_untyped(CallSiteType& c) {
  if (c.state == CallSiteState::kUnknown) c.state = CallSiteState::kUntyped;
}

void learn_late_type(CallSiteTypes& types, CallSiteType& c) {
  if (c.state == CallSiteState::kAmbiguous) return;
  c.state = CallSiteState::kAmbiguous;
  forget_memo(types);
}

void reset_call_site_types(CallSiteTypes& types) {
  if (types.slots) std::memset(types.slots, 0, types.capacity * sizeof(CallSiteType));
  types.used = 0;
  forget_memo(types);
}

}  // namespace runtime
}  // namespace heaptype
