// diagnostics.hpp: the runtime's messages to the user, one line on stderr each,
// "heaptype: ...". Written with write(2): no stdio, no allocation, safe at any point
// (start-up before main, a forked child, a signal handler).
#ifndef HEAPTYPE_RUNTIME_DIAGNOSTICS_HPP
#define HEAPTYPE_RUNTIME_DIAGNOSTICS_HPP

namespace heaptype {
namespace runtime {

void say(const char* a, const char* b = "", const char* c = "", const char* d = "", const char* e = "");

}  // namespace runtime
}  // namespace heaptype

#endif
