"""Run: programs run with profiling on, and their profiles found afterwards.

``runner`` (``heaptype run``, pytest, CTest and Bazel all run programs here), ``signals``
(what `heaptype run` is sent goes to its program), ``background`` (what a daemon leaves
running after its program's exit), ``linkage``
(does a program bring the runtime or must it be preloaded), ``gtest`` (GoogleTest programs:
their cases and shards), ``live_view`` (``heaptype run --watch``) and ``inprocess`` (the
runtime inside this Python process, for budgets of native code called from Python tests).
"""
