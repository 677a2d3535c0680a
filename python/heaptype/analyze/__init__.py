"""Analyze: profiles read and what is in them named; the Python face of the C++ core.

``profile`` (``heaptype.load``: a loaded profile, its views and filters), ``naming``,
``symbols`` and ``functions`` (type tags and code addresses to names), ``patterns`` (the
one glob dialect), ``labels`` (the words for what has no C++ name) and ``fleet`` (the
profiles of several processes of one program, joined).
"""
