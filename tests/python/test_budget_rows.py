"""The budget check's own pass (hb.measure_for_check, core/budget_rows.hpp): it hands
over only the rows a check can use, and every verdict must be the one the full
measure() gives: violations, shown rows, pattern matches and hints, the rows a
baseline keeps, the verdict table, baseline comparisons.

Profiles are synthetic heap histories (tests/python/synthetic.py) with many types, so
that most rows are covered by [defaults] alone, as in a GoogleTest binary's profile.
"""

from __future__ import annotations

import random

import pytest

import heaptype
from heaptype import budget as hb
from heaptype.budget.evaluate import typed_labels
from synthetic import generate, write

BUDGETS = [
    {"leaked": 0},
    {"leaked": 0, "types": {"Type7": {"peak": 64}, "Type1*": {"bytes": 100}}},
    {"peak": 40, "allocations": 3, "types": {"Missing": {"peak": 1}, "Typo8": {"peak": 1}}},
    {"types": {"*": {"peak": 48}}},
    {"types": {"(untyped)": {"peak": 1}, "(total)": {"bytes": 1}}},
    {"bytes": "1 KiB", "types": {"Type?": {"leaked": 0}, "Type2": {"allocations": 1}}},
    {},
]


def _profile(tmp_path, seed: int):
    rng = random.Random(seed)
    sc = generate(rng, operations=400)
    # many more types than the generator's few, each tag its own name (some shared)
    tags = sorted(sc.types)
    for i in range(40):
        sc.types[0x5000 + i] = f"Type{i % 37}"
    for sites in sc.sites.values():
        for site in sites:
            if site.tag and rng.random() < 0.8:
                site.tag = rng.choice(list(sc.types)) if rng.random() < 0.7 else rng.choice(tags)
    path = tmp_path / f"p{seed}.htp"
    path.write_bytes(write(sc, rng))
    return lambda: heaptype.load(path, naming=lambda raw, map_files: (sc.code_names(), None))


@pytest.mark.parametrize("seed", range(12))
def test_the_check_rows_give_the_verdicts_of_all_rows(tmp_path, seed):
    load = _profile(tmp_path, seed)
    full = hb.measure(load())
    for n, spec in enumerate(BUDGETS):
        budget = hb.budget_from_mapping("t", spec, "m")
        for complete in (True, False):
            for top in (0, 2, 5):
                hints_full, hints_rows = {}, {}
                baseline = {label: figures for label, figures in list(full.items())[::3]}
                rows = hb.measure_for_check(load(), budget, wanted=baseline, top=max(top, hb.MEASURED_LARGEST),
                                            complete=complete)
                assert set(rows) <= set(full) and {label: full[label] for label in rows} == dict(rows)
                a = hb.evaluate(budget, full, complete=complete, hints=hints_full)
                b = hb.evaluate(budget, rows, complete=complete, hints=hints_rows)
                where = (seed, n, complete, top)
                assert a.violations == b.violations, where
                assert a.shown_labels(budget) == b.shown_labels(budget), where
                assert a.matched_patterns == b.matched_patterns and a.unmatched == b.unmatched, where
                assert hints_full == hints_rows, where
                assert {label: a.limits[label] for label in b.limits} == b.limits, where
                shown = set(a.shown_labels(budget))
                assert hb.kept_labels(a.figures, shown, top) == hb.kept_labels(b.figures, shown, top), where
                assert hb.measured_lines(a, budget) == hb.measured_lines(b, budget), where
                kept = hb.kept_labels(b.figures, shown, top)
                thresholds = {"peak": hb.parse_threshold_option("peak:5%")}
                assert hb.compare("t", a.figures, baseline, thresholds, kept).changes == \
                    hb.compare("t", b.figures, baseline, thresholds, kept).changes, where


def test_the_check_rows_leave_out_rows_only_defaults_cover_and_that_pass(tmp_path):
    load = _profile(tmp_path, 3)
    full = hb.measure(load())
    budget = hb.budget_from_mapping("t", {"leaked": 1 << 40}, "m")
    rows = hb.measure_for_check(load(), budget, top=2)
    typed = [label for label in full if label not in (hb.TOTAL, hb.UNTYPED)]
    assert rows.typed_rows == len(typed) and rows.typed_labels() == typed
    for part in ("Type1", "pe3", "Nothing"):  # the search for a type's holders: only names that contain it
        assert rows.typed_labels(part) == [label for label in typed if part in label]
        assert typed_labels(rows, part) == typed_labels(full, part)
    assert len([label for label in rows if label not in (hb.TOTAL, hb.UNTYPED)]) == min(2, len(typed))
    assert rows[hb.TOTAL] == full[hb.TOTAL]
