"""pytest plugin: heap budgets per C++ type, and regression thresholds, in CI.

Registered through the ``pytest11`` entry point (``heaptype.pytest_plugin``, this
package), so installing heaptype is enough. Nothing happens unless asked:

- ``pytest --heap-budget`` turns the tests of a budget file (``heap-budget.toml``, or
  ``[tool.heaptype]`` in ``pyproject.toml``; ``--heap-budget-file`` names another) into
  pytest items: each runs a native program with profiling on and checks its budgets.
  ``[ctest]`` in that file turns the tests of a CMake build tree into items too.
- the ``heap_profile`` fixture runs native programs from Python tests, and the
  ``heap_budget(...)`` marker sets budgets for what they allocate.
- ``heap_budget(...)`` on a test without the fixture budgets the native code the test
  calls in this process, when the HeapType runtime is loaded here (``run/inprocess``).
- ``--heap-baseline FILE`` compares every measured test with stored figures,
  ``--heap-compare-fail peak:5%`` fails the tests that grew past a threshold, and
  ``--heap-save-baseline`` writes the figures of this run.

Measurements travel on the test reports (``report.heaptype``, one JSON text: xdist's
serializer walks every object of a report in Python), so the end-of-run
summary, the report files, the baseline and the warnings about budget patterns are
written once, by the process that sees every report: the xdist controller under
``pytest -n`` (``judge/budget_outputs``). The budget logic itself lives in ``heaptype.budget``,
shared with ``heaptype check`` and Bazel; per-binary work (a test binary's type names)
is done once per process (``heaptype.budget.session``).

The parts, one module each: ``options`` (command line, ini keys, the run's settings),
``collection`` (budget files and their items), ``ctest`` (CTest discovery),
``locks`` and ``fixtures`` (CTest's RESOURCE_LOCK, RUN_SERIAL and FIXTURES_* across xdist
workers), ``running`` (a profiled program), ``judging`` (verdicts and records), ``fixture``
(heap_profile and the heap_budget marker) and ``summary`` (the end of the run). pytest
finds the hooks and the fixture here, where they are imported.
"""

from __future__ import annotations

from .collection import (BudgetFileNode, BudgetItem, HeapBudgetFailure, pytest_collect_file,
                         pytest_collection_finish, pytest_collection_modifyitems, pytest_ignore_collect)
from .ctest import CTestCase, DiscoveryError, discover_ctest, list_gtest_cases, parse_gtest_list
from .fixture import (HeapProfiler, heap_profile, marker_budget, pytest_runtest_call,
                      pytest_runtest_makereport)
from .judging import judge, limit_usage, make_record
from .options import HeapState, pytest_addoption, pytest_configure, pytest_report_header, pytest_unconfigure
from .running import HeapRun, RunProblem, RunSpec, run_program
from .summary import HeapSession

__all__ = [
    "BudgetFileNode", "BudgetItem", "CTestCase", "DiscoveryError", "HeapBudgetFailure", "HeapProfiler", "HeapRun",
    "HeapSession", "HeapState", "RunProblem", "RunSpec", "discover_ctest", "heap_profile", "judge", "limit_usage",
    "list_gtest_cases", "make_record", "marker_budget", "parse_gtest_list", "pytest_addoption",
    "pytest_collect_file", "pytest_collection_finish", "pytest_collection_modifyitems", "pytest_configure",
    "pytest_ignore_collect", "pytest_report_header", "pytest_runtest_call", "pytest_runtest_makereport",
    "pytest_unconfigure", "run_program",
]
