"""Heap budgets: limits per C++ type, checked against a HeapType profile.

One engine for every integration: ``pytest --heap-budget`` (``pytest_plugin``),
``heaptype check`` (``judge/check_command``) and the Bazel budget test. It reads budget files
(TOML), matches type names, evaluates limits against a loaded profile, writes the
failure text, and keeps baselines (JSON) for regression thresholds. It imports nothing
from pytest and runs no process: callers run programs and load profiles, so each
integration decides how to run things and this module decides what "over budget" means.

A budget file::

    [defaults]                      # every typed row of every test, unless overridden
    leaked = 0

    [[tests]]
    name = "alloc_bench"
    command = ["build/alloc_bench", "10000"]   # relative to this file
    [tests.types."Small"]           # exact name, glob, "*", "(untyped)" or "(total)"
    peak = "64 KiB"

The full format is in docs/budgets.md.

The package, by job: ``values`` (fields, sizes, errors), ``matching`` (which rule
covers which row), ``toml_source`` (lines and columns for errors), ``model`` (limits,
rules, tests, files), ``parse`` (reading budget files), ``evaluate`` (measuring and
judging a profile), ``verdict`` (failure texts and table rows), ``baseline`` (stored
figures and regression thresholds), ``shards`` (one suite over many runners: shards,
merging their files), ``session`` (per-binary work done once per process).
"""

from __future__ import annotations

from ..analyze.labels import TOTAL, UNTYPED
from ..present.tables import render_markdown, render_table, shorten
from .baseline import (BASELINE_FORMAT, BASELINE_TOP, BASELINE_VERSION, Baseline, Change, Comparison, compare, kept_labels,
                       merge_baselines)
from .evaluate import (CheckFigures, Evaluation, Figures, UnmatchedPattern, Violation, evaluate, measure,
                       measure_for_check, pattern_matches, sort_labels, type_label, unjudged_peaks,
                       unmatched_warnings)
from .matching import close_names, did_you_mean, name_matches, pattern_specificity, type_matches
from .model import (THRESHOLD_HELP, Budget, BudgetFile, CTestSettings, Limit, Rule, TestEntry, Threshold,
                    command_line_rule, parse_threshold_option, parse_threshold_value)
from .parse import DEFAULT_FILE, budget_from_mapping, find_budget_file, has_pyproject_budgets, load_budget_file
from .shards import Shard, join_by_test, shard_of
from .toml_source import TomlLocator
from .values import (FIELD_LABEL, FIELD_MEANING, FIELDS, FINDING_FIELDS, LIMIT_FIELDS, SIZE_FIELDS, SIZE_HELP, BudgetError, HeapBudgetWarning,
                     format_exact, format_size, format_value, parse_count, parse_limit, parse_size)
from .verdict import (FIGURE_HEADER, MEASURED_HEADER, MEASURED_LARGEST, TABLE_HEADER, CallPath, evaluation_rows, failure_text,
                      fold_path, fold_templates, format_path, limits_text, measured_lines, profile_call_paths)

__all__ = [name for name in dir() if not name.startswith("_") and name != "annotations"]
