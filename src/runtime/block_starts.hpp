// block_starts.hpp: exactly which addresses start a block the runtime handed out.
//
// The block header's seal (block_header.hpp) is a 26-bit hash: good enough to
// decide what to read, never to decide what to write or which address to free. A
// program that placement-news a million objects into its own pools sees the bytes
// before one of them pass the seal now and then (a struct's tail looks like any
// other), and a runtime that then wrote an owner word there, or freed the address
// 16 bytes below, would corrupt the program. So every block that carries a header
// is also marked here, and everything that writes into a header, frees the
// allocation under it or trusts its size asks this table first.
//
// The table: one byte per 32 bytes of address space. Two blocks' starts are always
// at least 32 bytes apart (a glibc chunk is at least 32 bytes and a block's start
// lies 16 or more bytes into it), and every start is 16-byte aligned, so a byte
// names the block starting in its 32 bytes, if any: 1 at offset 0, 17 at offset 16.
// Plain byte stores need no read-modify-write: a block is unmarked before glibc can
// hand its memory to another thread, and marked before the program sees it.
//
// The bytes live in leaves of 32 MiB, each covering 1 GiB of address space,
// reserved on first use and backed by the kernel only where touched (1/32 of the
// heap's span: ~3%). The top table (one pointer per GiB of the 47-bit user space)
// is zero-initialised data, there before any constructor runs.
#ifndef HEAPTYPE_RUNTIME_BLOCK_STARTS_HPP
#define HEAPTYPE_RUNTIME_BLOCK_STARTS_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace heaptype {
namespace runtime {

constexpr unsigned kAddressBits = 47;     // x86-64 and AArch64 user space (without 5-level paging hints)
constexpr unsigned kLeafShift = 30;       // a leaf covers 1 GiB
constexpr unsigned kGranuleShift = 5;     // a byte covers 32 bytes
constexpr size_t kLeafCount = size_t{1} << (kAddressBits - kLeafShift);
constexpr size_t kLeafBytes = size_t{1} << (kLeafShift - kGranuleShift);

extern std::atomic<uint8_t*> g_start_leaves[kLeafCount];

// The byte that marks a start at p (16-byte aligned): which half of its 32 bytes.
inline uint8_t start_mark(uintptr_t p) { return static_cast<uint8_t>((p & 16) | 1); }

inline uint8_t* start_byte(uint8_t* leaf, uintptr_t p) {
  return leaf + ((p & ((uintptr_t{1} << kLeafShift) - 1)) >> kGranuleShift);
}

// The byte that marks a block of ours starting at p, or nullptr when none does.
// Exact: never found for an address the runtime did not hand out (or that was
// freed since).
inline uint8_t* block_start_mark(const void* address) {
  uintptr_t p = reinterpret_cast<uintptr_t>(address);
  if (p & ((~uintptr_t{0} << kAddressBits) | 15)) return nullptr;  // unaligned, or beyond the table
  uint8_t* leaf = g_start_leaves[p >> kLeafShift].load(std::memory_order_acquire);
  if (!leaf) return nullptr;
  uint8_t* mark = start_byte(leaf, p);
  return __atomic_load_n(mark, __ATOMIC_RELAXED) == start_mark(p) ? mark : nullptr;
}

// The leaf for p, reserved if it is new; nullptr when p lies outside the table or
// the kernel has no address space for it.
uint8_t* start_leaf(uintptr_t p);

// Marks p as a block's start. False when the table cannot cover p: the block must
// then go out without a header (the caller hands out the allocation itself).
inline bool mark_block_start(const void* address) {
  uintptr_t p = reinterpret_cast<uintptr_t>(address);
  if (p >> kAddressBits) return false;
  uint8_t* leaf = g_start_leaves[p >> kLeafShift].load(std::memory_order_acquire);
  if (__builtin_expect(!leaf, 0) && !(leaf = start_leaf(p))) return false;
  __atomic_store_n(start_byte(leaf, p), start_mark(p), __ATOMIC_RELAXED);
  return true;
}

// The block whose mark this is is released: call before its memory goes back to glibc.
inline void clear_block_start(uint8_t* mark) { __atomic_store_n(mark, uint8_t{0}, __ATOMIC_RELAXED); }

// The same by the block's address (marked).
inline void clear_block_start(const void* address) {
  uintptr_t p = reinterpret_cast<uintptr_t>(address);
  clear_block_start(start_byte(g_start_leaves[p >> kLeafShift].load(std::memory_order_acquire), p));
}

// The table's bytes the kernel backs now (pages once touched stay: also its peak).
uint64_t block_starts_resident_bytes();

}  // namespace runtime
}  // namespace heaptype

#endif
