// diagnostics.hpp: the runtime's messages, one line each, "heaptype: ...". The
// program's stdout and stderr are the program's (a build tool reads what its children
// print): in normal operation the runtime says nothing there. HEAPTYPE_LOG=path sends
// every message to that file instead (`heaptype run` shows them after the run).
// Written with open(2) and write(2): no stdio, no allocation, safe at any point
// (start-up before main, a forked child, a signal handler). And the pid as text, for
// the messages and the file names.
#ifndef HEAPTYPE_RUNTIME_DIAGNOSTICS_HPP
#define HEAPTYPE_RUNTIME_DIAGNOSTICS_HPP

#include <cstdint>

namespace heaptype {
namespace runtime {

// A profile that cannot be written (at all, or any further): the one thing the user
// must hear even without a log. To HEAPTYPE_LOG's file, else to stderr.
void say(const char* a, const char* b = "", const char* c = "", const char* d = "", const char* e = "");

// Anything else (a setting not understood, a finding also in the profile, where a
// profile went): to HEAPTYPE_LOG's file, else nowhere.
void note(const char* a, const char* b = "", const char* c = "", const char* d = "", const char* e = "");

// Reads HEAPTYPE_LOG now, at start-up, while the environment is the one the program
// was started with (a message may come later from a signal handler, where getenv()
// is not safe, or after the program changed its environment).
void capture_log_destination();

// `value` in decimal, NUL-terminated, into `out` (24 bytes are enough); its length.
// No stdio: safe where snprintf is not.
int decimal_text(uint64_t value, char (&out)[24]);

// This process's id in decimal, NUL-terminated, into `out` (24 bytes are enough): for
// file names, where snprintf is not safe to call (a forked child, start-up).
void pid_text(char (&out)[24]);

}  // namespace runtime
}  // namespace heaptype

#endif
