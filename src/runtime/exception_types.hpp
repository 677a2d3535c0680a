// exception_types.hpp: thrown objects typed by the type they are thrown as.
//
// The C++ runtime allocates a thrown object with its ABI header in front of it
// (__cxa_allocate_exception: one malloc'ed block, untyped) and learns the object's
// type only afterwards, from the throw: __cxa_throw(object, type_info, destructor),
// or __cxa_init_primary_exception with the same arguments (std::make_exception_ptr).
// The runtime interposes both, retypes the block under the object with the address
// of its std::type_info as the type tag (the symbolizer names "typeinfo for T"
// symbols as T), and goes on to the C++ runtime's own definition.
//
// A dependent exception (std::rethrow_exception) is a block of its own that refers
// to the primary one; it goes through neither function, so the thrown object keeps
// its type and the dependent block stays "C++ runtime: exception object".
#ifndef HEAPTYPE_RUNTIME_EXCEPTION_TYPES_HPP
#define HEAPTYPE_RUNTIME_EXCEPTION_TYPES_HPP

namespace heaptype {
namespace runtime {

// Finds the C++ runtime's __cxa_throw and __cxa_init_primary_exception behind ours,
// once (at start-up, where allocations are not tracked; later on the first throw if
// a throw comes first).
void find_next_exception_functions();

}  // namespace runtime
}  // namespace heaptype

#endif
