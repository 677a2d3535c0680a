// mappings.hpp: which mapping of the process holds an address, asked of the kernel
// without allocating: the bounds of a thread's own stack, so that a walk of frame
// pointers reads only memory that is mapped.
#ifndef HEAPTYPE_RUNTIME_MAPPINGS_HPP
#define HEAPTYPE_RUNTIME_MAPPINGS_HPP

#include <cstdint>

namespace heaptype {
namespace runtime {

// The readable mapping holding `address`, [*start, *end); false when none holds it or
// /proc cannot say. One ioctl (PROCMAP_QUERY, Linux 6.11 and later), else a read of
// /proc/self/maps up to the line (about 2 us a line).
bool readable_mapping_of(uintptr_t address, uintptr_t* start, uintptr_t* end);

}  // namespace runtime
}  // namespace heaptype

#endif
