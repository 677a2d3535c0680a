"""The page a failing budget test leaves behind: the HTML report of its profile (the
page `heaptype html` writes), filtered to the rows over their limits, beside the
profile in the profile directory. A CI job that keeps that directory as an artifact
then links to something to open: the failing types' timeline, call paths, leaks and
findings, with the verdict on top.

Writing it costs what `heaptype html` costs on the filtered profile: two passes over
the events (the call tree with every timeline grouping, the time ranges), ~10 ms for a
test of 5,000 allocations, ~1 s at 2.3 million (one type kept, load average ~8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..analyze.labels import TOTAL

PAGE_SUFFIX = ".html"


def page_types(failing: Iterable[str]) -> list[str]:
    """The type filter of a failing test's page: the rows over their limits (or grown
    past a threshold); none (every type) when the whole process failed: the total was
    over, or only the process itself went wrong (a crash, an exit status).

    A row's label is used as the filter's pattern: type names hold no glob characters
    but ``*`` and ``?`` (``char*``), which make the filter at most a little wider."""
    labels = sorted(set(failing))
    return [] if not labels or TOTAL in labels else labels


def page_path(profile_path: str | Path) -> Path:
    """The page beside its profile: ``workload.1234.htp`` -> ``workload.1234.html``."""
    return Path(profile_path).with_suffix(PAGE_SUFFIX)


def write_failure_page(profile, failing: Iterable[str], failure: str, *, test: str,
                       profile_path: str | Path) -> Path:
    """Writes the page of a failing test's ``profile`` (a loaded heaptype.Profile,
    maybe already filtered, e.g. to a time window) and returns its path. ``failing``:
    the labels of the rows over their limits; ``failure``: the failure text, shown
    above the report."""
    from ..present.html import write_html
    from ..present.html.data import report_data
    from ..present.html.render import render_page

    types = page_types(failing)
    shown = profile.filter(types=types) if types else profile
    data = report_data(shown)
    data["verdict"] = {"test": test, "types": types, "text": failure}
    return write_html(render_page(data, f"HeapType budget failure: {test}"), page_path(profile_path))


def with_failure_page(record: dict, failure: str | None, run) -> str | None:
    """A failing run's failure text, naming its page (written now); the test's record
    (pytest_plugin.judging.make_record: ``over``, ``test``) keeps the page's path for the JUnit
    XML and the report files. ``run``: what was run, with its ``profile`` and
    ``profile_path``. A passing run, or one without a profile, writes nothing."""
    if failure is None or run.profile_path is None:
        return failure
    try:
        page = write_failure_page(run.profile, record["over"], failure, test=record["test"],
                                  profile_path=run.profile_path)
    except Exception as e:  # noqa: BLE001 - the page is an aid: the verdict stands without it
        failure += f"\n  no HTML page: {type(e).__name__}: {e}"
    else:
        record["page"] = str(page)
        failure += f"\n  HTML report: {page}"
    record["failure"] = failure
    return failure
