"""What a run of budget tests leaves behind, from the records of every test: the
terminal summary (the failures and the rows closest to their limits), the Markdown
report (every verdict, for a GitHub job summary), the JSON results, the baseline, and
the warnings about budget patterns that matched in no test at all.

Records are plain data (see ``pytest_plugin.judging.make_record``): under pytest-xdist they
come from the workers on the test reports, and this module runs once, at the
controller, over all of them, in test-id order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .. import budget as hb

SUMMARY_NUMERIC = (2, 3, 4, 5)
CHANGE_ORDER = ("regressed", "improved", "grew", "shrank", "new", "gone", "missing")
RESULTS_FORMAT = "heaptype-budget-results"


def sorted_records(records: Iterable[dict]) -> list[dict]:
    """Records in a stable order (test id), whatever order xdist workers finished in."""
    return sorted(records, key=lambda r: r["test"])


@dataclass
class SummaryRows:
    """The rows a summary shows, and how many it leaves out."""

    rows: list[list[str]]
    failing: int
    total: int

    @property
    def left_out(self) -> int:
        return self.total - len(self.rows)


def summary_rows(records: list[dict], limit: int | None = None) -> SummaryRows:
    """Every shown row when they fit in ``limit``; else the failing rows first (up to
    ``limit``), then the passing rows closest to their limits, in test order."""
    failing, passing = [], []
    for record in sorted_records(records):
        for row, usage in zip(record["rows"], record["usage"]):
            (failing if row[-1] not in ("", "ok") else passing).append((usage, row))
    total = len(failing) + len(passing)
    if limit is None or total <= limit:
        return SummaryRows([row for _, row in _in_test_order(failing + passing)], len(failing), total)
    chosen = failing[:limit]
    room = limit - len(chosen)
    closest = sorted((item for item in passing if item[0] > 0), key=lambda item: -item[0])[:room]
    return SummaryRows([row for _, row in chosen] + [row for _, row in _in_test_order(closest)], len(failing), total)


def _in_test_order(items: list[tuple[float, list[str]]]) -> list[tuple[float, list[str]]]:
    """By test, then the total first, the untyped row last, the types by name."""
    return sorted(items, key=lambda item: (item[1][0], item[1][1] != hb.TOTAL, item[1][1] == hb.UNTYPED, item[1][1]))


def folded(rows: list[list[str]], full_names: bool) -> list[list[str]]:
    """Rows with long template names folded (the type column), unless ``full_names``."""
    return rows if full_names else [[row[0], hb.fold_templates(row[1]), *row[2:]] for row in rows]


def change_lines(records: list[dict]) -> list[tuple[str, str]]:
    """(verdict, line) of every baseline change worth reporting, in a stable order."""
    lines = []
    for record in sorted_records(records):
        if record["in_baseline"] is False:
            lines.append(("missing", f"{record['test']}: not in the baseline"))
        for change in record["changes"]:
            lines.append((change["verdict"], f"{record['test']}: {change['text']}"))
    order = {verdict: i for i, verdict in enumerate(CHANGE_ORDER)}
    return sorted(lines, key=lambda line: order[line[0]])


def unmatched_patterns(records: list[dict]) -> list[str]:
    """One warning per budget pattern that matched in none of the tests it applies to
    (a pattern that matches in some test is no misspelling)."""
    matched = {key for record in records for key in record["matched"]}
    seen: dict[str, tuple[dict, int]] = {}
    holders: dict[str, set[str]] = {}  # every test's: the type may be held in some tests' rows only
    for record in sorted_records(records):
        for unmatched in record["unmatched"]:
            key = unmatched["key"]
            if key not in matched:
                first, count = seen.get(key, (unmatched, 0))
                seen[key] = (first, count + 1)
                holders.setdefault(key, set()).update(unmatched.get("holders", ()))
    messages = []
    for first, count in sorted(seen.values(), key=lambda item: (item[0]["origin"], item[0]["pattern"])):
        held_in = tuple(sorted(holders[first["key"]], key=lambda name: (len(name), name))[:3])
        pattern = hb.UnmatchedPattern(first["pattern"], first["origin"], tuple(first["close"]), first["typed_rows"],
                                      held_in)
        where = "the profile of the one test it applies to" if count == 1 else f"any of the {count} tests it applies to"
        messages.append(pattern.message(where))
    return messages


# --- the terminal ---------------------------------------------------------------------

def terminal_lines(records: list[dict], *, rows: int, report_files: list[Path], full_names: bool = False) -> list[str]:
    """The summary table (failures and the rows closest to their limits) and its count."""
    chosen = summary_rows(records, rows)
    lines = hb.render_table(hb.TABLE_HEADER, folded(chosen.rows, full_names), numeric=SUMMARY_NUMERIC)
    failed = [r["test"] for r in sorted_records(records) if not r["passed"]]
    shown_failed = ", ".join(failed[:10]) + (f" and {len(failed) - 10} more" if len(failed) > 10 else "")
    lines.append(f"{len(records)} measured, {len(failed)} failed" + (f": {shown_failed}" if failed else ""))
    if chosen.left_out:
        where = ", ".join(str(p) for p in report_files) or "--heap-report=FILE.md or --heap-json=FILE"
        lines.append(f"({len(chosen.rows)} of {chosen.total} rows shown: the failing rows, then those closest to "
                     f"their limits; every row: {where})")
    return lines


# --- Markdown -------------------------------------------------------------------------------

def markdown_lines(records: list[dict], *, warnings: list[str], baseline: Path | None, rows: int | None,
                   failures: bool) -> list[str]:
    """The summary as GitHub-flavoured Markdown; ``rows`` None: every row, and
    ``failures``: the failure texts too (the --heap-report file)."""
    ordered = sorted_records(records)
    failed = [r for r in ordered if not r["passed"]]
    verdict = f"{len(failed)} of {len(records)} failed" if failed else f"all {len(records)} within budget"
    lines = ["## Heap budgets", "", f"{verdict}.", ""]
    chosen = summary_rows(records, rows)
    lines += hb.render_markdown(hb.TABLE_HEADER, chosen.rows, numeric=SUMMARY_NUMERIC)
    if chosen.left_out:
        lines += ["", f"{len(chosen.rows)} of {chosen.total} rows: the failing rows, then those closest to their "
                      "limits."]
    if failures and failed:
        lines += ["", "### Failures"]
        for record in failed:
            lines += ["", f"#### `{record['test']}`", "", "```text", record.get("failure") or "(failed)", "```"]
    changes = change_lines(records) if baseline is not None else []
    if changes:
        lines += ["", f"### Against the baseline `{baseline.name}`", ""]
        lines += [f"- **{kind}** {_escape(text)}" for kind, text in changes]
    if warnings:
        lines += ["", "### Warnings", ""] + [f"- {_escape(message)}" for message in warnings]
    return lines + [""]


def _escape(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;")


# --- JSON -----------------------------------------------------------------------------------

def results_json(records: list[dict], *, warnings: list[str], baseline: Path | None = None) -> str:
    """Every measured test: its verdict, the figures of its kept rows, its rows as the
    summary shows them, its baseline changes, its failure text, a failing run's HTML
    page, and which budget patterns matched in it (so the results of a run's shards
    merge into the warnings one full run gives: ``merge_results``)."""
    tests = [_results_entry(record) for record in sorted_records(records)]
    return _results_text(tests, warnings, baseline.name if baseline else None)


def _results_entry(record: dict) -> dict:
    return {
        "test": record["test"], "passed": record["passed"], "complete": record["complete"],
        "profile": record["profile"],
        "figures": {label: dict(zip(hb.FIELDS, values)) for label, values in record["figures"].items()},
        "rows": [dict(zip(hb.TABLE_HEADER, row)) for row in record["rows"]],
        "changes": record["changes"], "failure": record.get("failure"), "page": record.get("page"),
        "in_baseline": record["in_baseline"], "matched": record["matched"], "unmatched": record["unmatched"],
    }


def _results_text(tests: list[dict], warnings: list[str], baseline: str | None) -> str:
    data = {"format": RESULTS_FORMAT, "version": 1, "tests": tests, "warnings": warnings, "baseline": baseline}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def load_results(path: Path) -> dict:
    """A --heap-json file, checked to be one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise hb.BudgetError(f"{path}: no such results file (pytest --heap-json=FILE writes it)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise hb.BudgetError(f"{path}: cannot read the results: {e}") from None
    except json.JSONDecodeError as e:
        raise hb.BudgetError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT or not isinstance(data.get("tests"), list):
        raise hb.BudgetError(f"{path}: not HeapType budget results (no \"format\": \"{RESULTS_FORMAT}\" "
                             "with a list of tests)")
    if not all(isinstance(entry, dict) and isinstance(entry.get("test"), str) for entry in data["tests"]):
        raise hb.BudgetError(f"{path}: malformed results: every test needs its \"test\" id")
    return data


def merge_results(paths: list[Path]) -> str:
    """The --heap-json files of a run's shards as the one a full run writes: every
    test once, in test order, and the warnings about budget patterns worked out again
    over all of them (a pattern that matched in no test of one shard may match in
    another's). A test in two files with different results is an error naming both."""
    loaded = [(Path(path), load_results(path)) for path in paths]
    tests = hb.join_by_test(((path, {entry["test"]: entry for entry in data["tests"]}) for path, data in loaded),
                            "results")
    entries = [tests[test] for test in sorted(tests)]
    if all("matched" in entry and "unmatched" in entry for entry in entries):
        warnings = unmatched_patterns(entries)
    else:  # files of an older HeapType: their own warnings
        warnings = sorted({message for _, data in loaded for message in data.get("warnings", [])})
    baselines = sorted({data.get("baseline") for _, data in loaded} - {None})
    return _results_text(entries, warnings, baselines[0] if len(baselines) == 1 else None)


def results_markdown(text: str) -> list[str]:
    """Merged results (``merge_results``) as the --heap-report Markdown of one run."""
    data = json.loads(text)
    records = [{**entry, "rows": [[row.get(name, "") for name in hb.TABLE_HEADER] for row in entry["rows"]],
                "usage": [0.0] * len(entry["rows"]), "in_baseline": entry.get("in_baseline")}
               for entry in data["tests"]]
    baseline = Path(data["baseline"]) if data.get("baseline") else None
    return markdown_lines(records, warnings=data["warnings"], baseline=baseline, rows=None, failures=True)


# --- the baseline ---------------------------------------------------------------------------

def save_baseline(path: Path, records: list[dict]) -> hb.Baseline:
    """Rewrite the baseline with this run's figures: the rows each record kept."""
    baseline = hb.Baseline(path, {r["test"]: {label: hb.Figures(*values) for label, values in r["figures"].items()}
                                  for r in records})
    baseline.save()
    return baseline
