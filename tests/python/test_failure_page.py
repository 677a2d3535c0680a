"""The HTML page a failing budget test leaves behind (issue 25): written beside its
profile in the profile directory, named in the failure text and in the JUnit XML
(``heaptype.page``), opened in headless Chromium.

tests/data/budget/workload.cpp's truth: small=5000 keeps 5,000 Small (16 B) live at
once (peak 80,000 B) in live_then_free<Small>, then frees them; medium=10 does the
same with 10 Medium (32 B).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from html_pages import browser, hover_timeline, open_page  # noqa: F401  (browser: a fixture)
from test_pytest_plugin import (budget_programs, clean_environment, junit_properties,  # noqa: F401 (fixtures)
                                project, run)

from heaptype.budget.failure_page import page_path, page_types, with_failure_page

pytest_plugins = ["pytester"]

SMALL_OVER = """
[[tests]]
name = "small_big"
command = ["build/workload", "small=5000", "medium=10"]
[tests.types."Small"]
peak = "64 KiB"

[[tests]]
name = "small_ok"
command = ["build/workload", "small=10"]
[tests.types."Small"]
peak = "64 KiB"
"""


def pages_named_in(result) -> list[Path]:
    """The pages the failure texts name, once each: under CI (the CI variable set) pytest's
    short summary repeats each failure's whole text."""
    lines = [line for line in result.outlines if line.startswith("  HTML report: ")]
    return [Path(line.split(": ", 1)[1]) for line in dict.fromkeys(lines)]


def page_named_in(result) -> Path:
    [page] = pages_named_in(result)
    return page


def embedded_data(page: Path) -> dict:
    text = page.read_text()
    start = text.index('<script type="application/json" id="heaptype-data">') + len(
        '<script type="application/json" id="heaptype-data">')
    return json.loads(text[start:text.index("</script>", start)])


def test_a_failing_budget_test_writes_a_page_that_shows_the_failing_type(project, browser):
    (project.path / "heap-budget.toml").write_text(SMALL_OVER.lstrip())
    result = run(project, "--heap-budget", "--junitxml=junit.xml", "--heap-json=results.json")
    result.assert_outcomes(passed=1, failed=1)
    page = page_named_in(result)
    results = {t["test"]: t for t in json.loads((project.path / "results.json").read_text())["tests"]}
    assert results["heap-budget.toml::small_big"]["page"] == str(page)
    assert results["heap-budget.toml::small_ok"]["page"] is None
    # beside the profile of the run the verdict is about (the one recording call paths)
    assert page.parent.name.endswith("-call-paths") and page_path(next(page.parent.glob("*.htp"))) == page
    properties = junit_properties(project.path / "junit.xml")
    assert properties["small_big"]["heaptype.page"] == str(page)
    assert "heaptype.page" not in properties["small_ok"]
    assert embedded_data(page)["verdict"]["types"] == ["Small"]

    opened = open_page(browser, page)
    opened.screenshot("budget-failure-page")
    assert (opened.errors, opened.dialogs, opened.requests) == ([], [], [])
    verdict = opened.page.text_content("#verdict")
    assert verdict.startswith("heap budget exceeded: heap-budget.toml::small_big\n")
    assert "  Small: peak live 78.1 KiB (80,000 B) > limit 64 KiB (65,536 B)" in verdict
    assert verdict.endswith("This page shows only Small.")
    # the timeline: the failing type alone, exact at its peak
    assert opened.attributes("#legend .legend-item", "data-series") == ["Small"]
    lines = hover_timeline(opened, "peak")
    assert (lines["Small"], lines["total live"]) == ("80,000 B", "80,000 B")
    # its call paths: from main to live_then_free<Small> to the type
    frames = opened.attributes("#flame g.frame", "data-name")
    assert set(opened.attributes("#flame g.frame.type", "data-name")) == {"Small"}
    assert "main" in frames and any(re.search(r"live_then_free<Small>", f) for f in frames), frames
    assert opened.table("types-table")["Small"][1:5] == ["5,000", "5,000", "78.1 KiB", "78.1 KiB"]


def test_the_heap_profile_fixture_names_a_page_for_each_failing_run(project):
    workload = project.path / "build" / "workload"
    project.makepyfile(test_native=f"""
        import pytest

        @pytest.mark.heap_budget("Small", peak="8 KiB")
        def test_over(heap_profile):
            heap_profile.run([{str(workload)!r}, "small=1000"], name="over")
            heap_profile.run([{str(workload)!r}, "small=10"], name="within")
        """)
    result = run(project, "--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    page = page_named_in(result)
    properties = junit_properties(project.path / "junit.xml")["test_over"]
    assert properties["heaptype[over].page"] == str(page) and "heaptype[within].page" not in properties
    assert page.parent.name.startswith("1-over") and page.read_text().startswith("<!DOCTYPE html>")
    data = embedded_data(page)
    assert data["verdict"]["test"] == "test_native.py::test_over[over]"
    assert [row["label"] for row in data["types"]["rows"]] == ["Small"]
    assert data["types"]["rows"][0]["peak_bytes"] == 16000


def test_the_page_shows_every_type_when_the_whole_process_failed():
    assert page_types(["Small", "Medium"]) == ["Medium", "Small"]
    assert page_types(["(untyped)"]) == ["(untyped)"]
    assert page_types(["Small", "(total)"]) == []   # the total over: every type counts
    assert page_types([]) == []                     # a crash or an exit status: the same


class UnreadableRun:
    """A run whose profile cannot be read back (say, the disk filled up)."""

    profile_path = Path("/nowhere/workload.1.htp")

    @property
    def profile(self):
        raise OSError("No space left on device")


def test_a_page_that_cannot_be_written_leaves_the_verdict_as_it_was():
    record = {"test": "t", "over": ["Small"], "failure": "heap budget exceeded: t"}
    failure = with_failure_page(record, "heap budget exceeded: t", UnreadableRun())
    assert failure == "heap budget exceeded: t\n  no HTML page: OSError: No space left on device"
    assert record["failure"] == failure and "page" not in record
    assert with_failure_page(record, None, UnreadableRun()) is None  # a passing run: no page
