// diagnostics.hpp: the runtime's messages to the user, one line on stderr each,
// "heaptype: ...". Written with write(2): no stdio, no allocation, safe at any point
// (start-up before main, a forked child, a signal handler). And the pid as text, for
// the messages and the file names.
#ifndef HEAPTYPE_RUNTIME_DIAGNOSTICS_HPP
#define HEAPTYPE_RUNTIME_DIAGNOSTICS_HPP

namespace heaptype {
namespace runtime {

void say(const char* a, const char* b = "", const char* c = "", const char* d = "", const char* e = "");

// This process's id in decimal, NUL-terminated, into `out` (24 bytes are enough): for
// file names, where snprintf is not safe to call (a forked child, start-up).
void pid_text(char (&out)[24]);

}  // namespace runtime
}  // namespace heaptype

#endif
