"""HeapType: a type-preserving heap profiler for C++.

C++ programs built with HeapType's header and runtime write a profile that records,
for every heap allocation, the exact C++ type, the calling context, size, count and
time. This package reads those profiles and reports them::

    import heaptype
    profile = heaptype.load("heaptype.app.1234.htp")
    for group in profile.by_type():
        print(group.label, group.allocations, group.peak_bytes)

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
