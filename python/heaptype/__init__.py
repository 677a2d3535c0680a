"""HeapType: a type-preserving heap profiler for C++.

C++ programs built with HeapType's header and runtime write a profile that records,
for every heap allocation, the exact C++ type, the call site, size, count and time.
This package reads those profiles and reports them::

    import heaptype
    profile = heaptype.load("heaptype.app.1234.htp")
    for row in profile.by_type():
        print(row.type, row.allocations, row.peak_bytes)
"""

from .profile import Profile, ProfileError, Totals, TypeRow, load

__version__ = "0.1.0"
__all__ = ["Profile", "ProfileError", "Totals", "TypeRow", "load", "__version__"]
