// snapshot_signal.hpp: a signal that asks for a snapshot (HEAPTYPE_SIGNAL).
//
// With HEAPTYPE_SIGNAL=USR2, `kill -USR2 PID` makes the runtime write out every thread's events, the module
// map and a SNAPSHOT chunk, so a reader of the growing file sees the program as
// it stands. The handler only sets a flag and wakes the ticker's work early: the
// flush takes locks and writes, which a signal handler must not do (the signal
// may arrive inside the runtime, holding the very lock the flush needs).
#ifndef HEAPTYPE_RUNTIME_SNAPSHOT_SIGNAL_HPP
#define HEAPTYPE_RUNTIME_SNAPSHOT_SIGNAL_HPP

namespace heaptype {
namespace runtime {

// Installs the handler for HEAPTYPE_SIGNAL (a number or a name such as USR2; unset or
// 0: none, so that every signal keeps the program's own disposition), unless the
// program already handles that signal. True when it installed one.
bool install_snapshot_signal();
// True (once) when a snapshot was asked for since the last call.
bool take_snapshot_request();

}  // namespace runtime
}  // namespace heaptype

#endif
