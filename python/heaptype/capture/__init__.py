"""Capture: what goes into a program so that it records its heap, before or while it runs.

``flags`` (compiler and linker flags from the package's flags.json, for ``heaptype
--cflags/--ldflags``, CMake and Bazel alike) and ``attach`` (the runtime put into, and
taken out of, a running process with gdb).
"""
