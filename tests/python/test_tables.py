"""The table printer's cutting of long cells (python/heaptype/present/tables.py)."""

from heaptype.present.tables import render_table, shorten


def test_a_cut_name_keeps_its_inferred_marker():
    name = "read_content_core(httplib::Stream&)::{lambda(char const*, unsigned long)#2} (inferred)"
    assert shorten(name, 40) == "read_content_core(httplib:... (inferred)"
    assert len(shorten(name, 40)) == 40
    assert shorten("T (inferred in A)", 40) == "T (inferred in A)"
    assert shorten("x" * 50 + " (inferred in A)", 30) == "x" * 11 + "... (inferred in A)"


def test_a_cut_name_without_a_marker_ends_in_dots():
    assert shorten("std::map<int, std::string>", 12) == "std::map<..."
    assert shorten("short", 12) == "short"
    lines = render_table(["type", "bytes"], [["a" * 20 + " (inferred)", "10"]], widths={0: 16})
    assert lines[2].startswith("aa... (inferred)")
