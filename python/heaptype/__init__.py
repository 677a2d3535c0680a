"""HeapType: a type-preserving heap profiler for C++.

C++ programs built with HeapType's header and runtime write a profile that records,
for every heap allocation, the exact C++ type, the calling context, size, count and
time. This package reads those profiles and reports them::

    import heaptype
    profile = heaptype.load("heaptype.app.1234.htp")
    for group in profile.by_type():
        print(group.label, group.allocations, group.peak_bytes)

The modules gather by stage, in the order data flows: ``capture/`` (flags, attaching),
``run/`` (programs run with profiling on), ``analyze/`` (profiles read and named),
``present/`` (reports, pages, exports) and ``judge/`` (budget verdicts). The front doors
stay here: ``load`` (this module), ``cli`` (the ``heaptype`` command), ``budget/`` (the
budget engine, ``heaptype.budget``), ``pytest_plugin/`` (``pytest --heap-budget``), ``demo``.
"""

__version__ = "0.1.0"
__all__ = ["CallPathRow", "Filters", "Profile", "ProfileError", "load", "__version__"]


def __getattr__(name):
    # The analysis API loads the compiled core: only when used, so that
    # `heaptype --cflags` and the pytest plugin's registration start fast.
    if name in __all__:
        from .analyze import profile

        return getattr(profile, name)
    raise AttributeError(f"module 'heaptype' has no attribute {name!r}")
