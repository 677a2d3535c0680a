"""The plugin's command-line options and ini keys, and the settings of one run
(``HeapState``), checked once at configure time."""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

import pytest

from .. import budget as hb
from ..budget.session import SessionNames
from ..run.inprocess import InProcessRuntime
from .summary import HeapSession


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("heaptype", "heap budgets per C++ type (HeapType)")
    group.addoption("--heap-budget", action="store_true", default=False,
                    help="run the tests of the budget file (heap-budget.toml, or [tool.heaptype] in "
                         "pyproject.toml, in the rootdir) with profiling on and check their budgets")
    group.addoption("--heap-budget-file", metavar="FILE", default=None,
                    help="the budget file to use (implies --heap-budget)")
    group.addoption("--heap-profile-dir", metavar="DIR", default=None,
                    help="keep the profiles here (default: heaptype-profiles in pytest's temporary directory)")
    group.addoption("--heap-baseline", metavar="FILE", default=None,
                    help="JSON file of stored figures: compare every measured test with it")
    group.addoption("--heap-save-baseline", action="store_true", default=False,
                    help="rewrite the --heap-baseline file with this run's figures (the totals, the budgeted "
                         "types and the top types of each test)")
    group.addoption("--heap-compare-fail", metavar="FIELD:AMOUNT", action="append", default=[],
                    help="fail a test whose FIELD (peak, bytes, allocations, leaked) grew over the baseline "
                         "by more than AMOUNT: a percentage (peak:5%%) or an amount (bytes:1MiB); repeatable")
    group.addoption("--heap-baseline-top", metavar="N", type=int, default=None,
                    help=f"types per test a saved baseline keeps besides the budgeted ones and the totals "
                         f"(default {hb.BASELINE_TOP})")
    group.addoption("--heap-default-peak", metavar="SIZE", default=None,
                    help="a (total) peak limit for every test that sets none of its own, e.g. 256MiB")
    group.addoption("--heap-leaks", action="store_true", default=False,
                    help="leaked = 0 for every typed row of every test that sets no leaked limit of its own")
    group.addoption("--heap-summary", choices=("auto", "no"), default="auto",
                    help="the end-of-run heap summary table (default: auto, when anything was measured)")
    group.addoption("--heap-summary-rows", metavar="N", type=int, default=20,
                    help="rows of the summary table: the failing rows, then those closest to their limits "
                         "(default 20; the report files hold every row)")
    group.addoption("--heap-report", metavar="FILE.md", default=None,
                    help="write every verdict, failure and baseline change as Markdown (e.g. $GITHUB_STEP_SUMMARY)")
    group.addoption("--heap-json", metavar="FILE", default=None,
                    help="write every measured test's figures, verdict and failure text as JSON")
    group.addoption("--heap-full-names", action="store_true", default=False,
                    help="show template names whole in failure texts (by default long argument lists fold to <…>)")
    group.addoption("--heap-call-paths", choices=("on-failure", "always"), default="on-failure",
                    help="on-failure (default): budget runs record call sites only, a fifth of the cost on "
                         "start-up-heavy programs, and a failing run is made once more with call paths for its "
                         "failure text; always: every run records call paths")
    group.addoption("--heap-shard", metavar="I/N", default=None,
                    help="run shard I of N (1-based, e.g. 2/4) of the collected tests, the rest deselected: a test's "
                         "shard is a hash of its id, the same on every runner and with or without xdist; merge the "
                         "shards' baselines and --heap-json results with `heaptype baseline merge` / `heaptype "
                         "results merge`")
    parser.addini("heap_budget_file", "budget file for --heap-budget (default: heap-budget.toml in the rootdir)")
    parser.addini("heap_baseline", "baseline file for --heap-compare-fail / --heap-save-baseline")
    parser.addini("heap_baseline_top", f"types per test a saved baseline keeps (default {hb.BASELINE_TOP})")


STATE = pytest.StashKey["HeapState"]()


class HeapState:
    """The plugin's settings for one pytest run, checked once at configure time."""

    def __init__(self, config: pytest.Config):
        self.config = config
        option = config.option
        self.budget_file = self._path(option.heap_budget_file, "heap_budget_file")
        self.active = bool(option.heap_budget or option.heap_budget_file)
        self.explicit_file = self.budget_file is not None
        if self.budget_file is None and self.active:
            self.budget_file = hb.find_budget_file(config.rootpath, config.invocation_params.dir)
        self.collected: set[Path] = set()
        self.summary = option.heap_summary != "no"
        self._profile_dir = Path(option.heap_profile_dir).resolve() if option.heap_profile_dir else None
        self.explicit_profile_dir = self._profile_dir
        self.baseline_path = self._path(option.heap_baseline, "heap_baseline")
        self.baseline_from_ini = option.heap_baseline is None and self.baseline_path is not None
        self.save_baseline = option.heap_save_baseline
        self.thresholds = self._thresholds(option.heap_compare_fail)
        self.baseline = self._baseline()
        self.baseline_top = self._baseline_top(option.heap_baseline_top)
        self.command_line_rules = self._command_line_rules(option.heap_default_peak, option.heap_leaks)
        self.full_names = option.heap_full_names
        self.call_paths_always = option.heap_call_paths == "always"
        self.summary_rows = max(option.heap_summary_rows, 1)
        self.report_path = self._path(option.heap_report, None)
        self.json_path = self._path(option.heap_json, None)
        self.records: list[dict] = []
        self.saved_baseline: Path | None = None
        # Every measured row's figures leave the session (stored, compared, written out):
        # budget runs then record events (an aggregated run keeps no own peak for some rows).
        self.keeps_all_rows = bool(self.baseline_path or self.save_baseline or option.heap_json or
                                   option.heap_report)
        self.names = SessionNames()  # per-binary tables, for every profile this process loads
        # Programs whose aggregated run's threads waited for each other's counts: their
        # later tests record events from the start (docs/aggregate.md, "Threads").
        self.counts_contended: set[str] = set()
        self.pattern_hints: dict = {}  # close type names of each unmatched budget pattern, found once
        self.leaks = option.heap_leaks
        self.shard = self._shard(option.heap_shard)
        self._ctest_build_dirs: set[Path] | None = None
        self.discovery = None  # the xdist controller's CTest discovery thread
        self.collected_items: list = []  # every item, before -k, -m and --heap-shard deselect
        self.fixture_plan = None  # who waits for whom among CTest fixtures' tests (fixtures.py)
        self._own_run_id = uuid.uuid4().hex
        self._runtime: InProcessRuntime | None | bool = False  # looked for when first needed
        if "heaptype" in os.environ.get("LD_PRELOAD", ""):
            self.runtime()  # preloaded: stop recording pytest itself until a test asks

    @property
    def run_id(self) -> str:
        """This test run's id: the one its xdist workers share, else this process's."""
        return getattr(self.config, "workerinput", {}).get("testrunuid") or self._own_run_id

    def _path(self, option: str | None, ini: str | None) -> Path | None:
        """A path from the command line (relative to where pytest was started) or from
        the ini file (relative to that file)."""
        if option:
            return (self.config.invocation_params.dir / option).resolve()
        value = self.config.getini(ini) if ini else None
        if not value:
            return None
        base = self.config.inipath.parent if self.config.inipath else self.config.rootpath
        return (base / value).resolve()

    def _thresholds(self, expressions: list[str]) -> dict[str, hb.Threshold]:
        thresholds: dict[str, hb.Threshold] = {}
        for expression in expressions:
            try:
                threshold = hb.parse_threshold_option(expression)
            except ValueError as e:
                raise pytest.UsageError(f"--heap-compare-fail: {e}") from None
            if threshold.field in thresholds:
                raise pytest.UsageError(f"--heap-compare-fail: {threshold.field} is given twice "
                                        f"({thresholds[threshold.field].text()} and {threshold.text()})")
            thresholds[threshold.field] = threshold
        if thresholds and not self.baseline_path:
            raise pytest.UsageError("--heap-compare-fail needs a baseline to compare with: --heap-baseline FILE")
        return thresholds

    def _baseline(self) -> hb.Baseline | None:
        if self.save_baseline and not self.baseline_path:
            raise pytest.UsageError("--heap-save-baseline needs the file to write: --heap-baseline FILE")
        if not self.baseline_path or self.save_baseline:
            return None
        if self.baseline_from_ini and not self.thresholds and not self.baseline_path.exists():
            return None  # a configured baseline not written yet: nothing to compare, no error
        try:
            return hb.Baseline.load(self.baseline_path)
        except hb.BudgetError as e:
            raise pytest.UsageError(f"--heap-baseline: {e}") from None

    @staticmethod
    def _shard(text: str | None) -> hb.Shard | None:
        if text is None:
            return None
        try:
            return hb.Shard.parse(text)
        except hb.BudgetError as e:
            raise pytest.UsageError(f"--heap-shard: {e}") from None

    def runtime(self) -> InProcessRuntime | None:
        """The HeapType runtime loaded in this process (LD_PRELOAD, or a ctypes library
        that links it), found once; it records only while a test asks for it."""
        if self._runtime is False:
            self._runtime = InProcessRuntime.find()
            if self._runtime is not None:
                self._runtime.stop()
        return self._runtime

    def _baseline_top(self, option: int | None) -> int:
        value = option if option is not None else (self.config.getini("heap_baseline_top") or hb.BASELINE_TOP)
        try:
            top = int(value)
        except ValueError:
            raise pytest.UsageError(f"heap_baseline_top: {value!r} is not a whole number") from None
        if top < 0:
            raise pytest.UsageError(f"--heap-baseline-top: {top} cannot be negative")
        return top

    @staticmethod
    def _command_line_rules(default_peak: str | None, leaks: bool) -> list[hb.Rule]:
        """--heap-default-peak and --heap-leaks as the least specific rules of every
        budget: a test's file entry, [defaults] or marker that sets the limit wins."""
        rules = []
        if default_peak is not None:
            try:
                peak = hb.parse_size(default_peak)
            except ValueError as e:
                raise pytest.UsageError(f"--heap-default-peak: {e}") from None
            rules.append(hb.command_line_rule(hb.TOTAL, "peak", peak, f"--heap-default-peak={default_peak}"))
        if leaks:
            rules.append(hb.command_line_rule(None, "leaked", 0, "--heap-leaks"))
        return rules

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def is_ctest_build_dir(self, path: Path) -> bool:
        """Whether ``path`` is the build tree the budget file's [ctest] names. A budget
        file that does not parse names none here: its own node reports the error."""
        if self._ctest_build_dirs is None:
            self._ctest_build_dirs = set()
            if self.budget_file is not None and self.budget_file.is_file():
                try:
                    settings = hb.load_budget_file(self.budget_file).ctest
                except hb.BudgetError:
                    settings = None
                if settings is not None:
                    self._ctest_build_dirs.add(settings.build_dir.resolve())
        if not self._ctest_build_dirs:
            return False
        return path in self._ctest_build_dirs or (path.is_symlink() and path.resolve() in self._ctest_build_dirs)

    def profile_dir(self) -> Path:
        if self._profile_dir is None:
            factory = getattr(self.config, "_tmp_path_factory", None)
            base = factory.getbasetemp() if factory else Path(tempfile.mkdtemp(prefix="heaptype-"))
            self._profile_dir = base / "heaptype-profiles"
        return self._profile_dir

    def thresholds_for(self, budget: hb.Budget) -> hb.Budget:
        """A budget with the command line's thresholds and limits added."""
        return budget.with_thresholds(self.thresholds).with_rules(self.command_line_rules)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "heap_budget(type=None, *, peak=None, bytes=None, allocations=None, leaked=None, "
        "regression=None): heap limits for the native programs this test runs with the heap_profile "
        "fixture; without a type, for every typed row (see docs/budgets.md)")
    state = HeapState(config)
    config.stash[STATE] = state
    config.pluginmanager.register(HeapSession(state), "heaptype-session")
    from .collection import CTestFixtureOrder  # collection imports this module

    config.pluginmanager.register(CTestFixtureOrder(state), "heaptype-ctest-fixtures")
    state.discovery = _discover_for_workers(config, state)


def _discover_for_workers(config: pytest.Config, state: HeapState):
    """Under xdist, the controller discovers the budget file's CTest tests while the
    workers start (ctest.discover_for_workers); the workers share that run's result
    through the run's id, which the controller sets for them if no one did."""
    if not state.active or state.budget_file is None or hasattr(config, "workerinput") or \
            not getattr(config.option, "numprocesses", None) or not state.budget_file.is_file():
        return None
    try:
        settings = hb.load_budget_file(state.budget_file).ctest
    except hb.BudgetError:
        return None  # its collection reports it
    if settings is None or not (settings.build_dir / "CTestTestfile.cmake").is_file():
        return None
    if getattr(config.option, "testrunuid", None) is None:
        config.option.testrunuid = uuid.uuid4().hex
    from .ctest import discover_for_workers

    return discover_for_workers(settings, config.option.testrunuid)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None and state.discovery is not None:
        state.discovery.join(timeout=60)
    session = config.pluginmanager.get_plugin("heaptype-session")
    if session is not None:
        config.pluginmanager.unregister(session)


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash.get(STATE, None)
    if state is None:
        return []
    shard = [f"heaptype: shard {state.shard.text()} (--heap-shard): the tests whose id hashes to it"] if state.shard else []
    if not state.active:
        return shard
    lines = shard + [f"heaptype: budgets from {state.budget_file}" if state.budget_file else
             f"heaptype: --heap-budget: no {hb.DEFAULT_FILE} and no [tool.heaptype] in pyproject.toml in "
             f"{config.rootpath}: only heap_budget markers apply"]
    if state.baseline_path:
        verb = "saving to" if state.save_baseline else "comparing with"
        lines.append(f"heaptype: {verb} the baseline {state.baseline_path}")
    return lines
