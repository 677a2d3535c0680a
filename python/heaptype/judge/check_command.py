"""``heaptype check PROFILE --budget FILE [--test NAME]``: a budget verdict as an exit status.

For scripts, CTest (``add_test(NAME app_budget COMMAND heaptype check app.htp ...)``)
and the Bazel budget test: the same budget files and the same engine
(``heaptype.budget``) as ``pytest --heap-budget``, without pytest.

Exit status: 0 within budget, 1 over budget, 2 bad input (unreadable profile, bad
budget file, unknown test).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..present.console import CommandError, load_profile

# The budget engine is imported where it is used: its imports (~30 ms) would otherwise
# delay every command, as the parser adds `check` to them all.
if TYPE_CHECKING:
    from .. import budget as hb

EXIT_OVER_BUDGET = 1

DESCRIPTION = """\
Check a profile against the budgets of a budget file (the file `pytest --heap-budget` reads).
Exit status: 0 within budget, 1 over budget, 2 bad input."""

EPILOG = """\
examples:
  heaptype check app.htp --budget heap-budget.toml --test app_small
  heaptype check app.htp                 # heap-budget.toml or pyproject.toml [tool.heaptype] here

sizes in budget files: B, KiB, MiB, GiB (KB, MB, GB read as the same 1024-based units)
"""


def add_check_parser(subparsers) -> argparse.ArgumentParser:
    """Adds `heaptype check` to the command's subparsers."""
    check = subparsers.add_parser(
        "check", help="check a profile against a budget file (exit status 1 when over budget)",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("profile", help="a .htp file")
    check.add_argument("--budget", metavar="FILE",
                       help="the budget file (default: heap-budget.toml, else pyproject.toml with [tool.heaptype], "
                            "in the current directory)")
    check.add_argument("--test", metavar="NAME",
                       help="whose budgets to apply: a [[tests]] name, matched like CTest names "
                            "(default: the only test of the file, or the one whose program wrote the profile); "
                            "a GoogleTest case NAME[Suite.Case] also gets the budgets of NAME")
    check.add_argument("-q", "--quiet", action="store_true", help="print nothing when within budget")
    check.add_argument("--full-names", action="store_true",
                       help="show template names whole (by default long argument lists fold to <…>)")
    check.set_defaults(handler=cmd_check)
    return check


class NeedsEvents(Exception):
    """An aggregated profile that a budget check cannot judge: a peak the budget limits is
    not kept in it, or it holds no counts (the program did not reach its end)."""


def cmd_check(args) -> int:
    try:
        return check_profile(args)
    except NeedsEvents as e:
        raise CommandError(f"check: {e}; record the program without --aggregate (HEAPTYPE_MODE=full)") from None


def check_profile(args) -> int:
    """cmd_check's verdict; raises NeedsEvents before printing anything when the profile
    cannot be judged (the caller may record the program again, with events)."""
    profile, budget, evaluation = _evaluate(args)
    return _print_verdict(args, profile, budget, evaluation)


def judged_by_counts(profile: str, budget: str | None, test: str | None) -> bool:
    """Whether `heaptype check PROFILE --budget BUDGET [--test TEST]` can judge this
    profile: False for an aggregated one it cannot (see NeedsEvents). Prints nothing."""
    args = argparse.Namespace(profile=profile, budget=budget, test=test)
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # the check itself says its warnings
            _evaluate(args)
    except NeedsEvents:
        return False
    except CommandError:
        return True  # the check itself says what is wrong
    return True


def _evaluate(args):
    from .. import budget as hb

    budgets = _load_budgets(args.budget)
    profile = load_profile(args.profile)
    if profile.aggregated and not profile.raw.aggregate_complete:
        raise NeedsEvents(f"{args.profile} is an aggregated profile without counts (the program did not reach its "
                          "end)")
    budget = choose_budget(budgets, args.test, profile)
    figures = hb.measure(profile)
    evaluation = hb.evaluate(budget, figures, profile_path=args.profile, complete=profile.complete)
    unjudged = hb.unjudged_peaks(figures, evaluation)
    if unjudged:
        raise NeedsEvents(f"{args.profile} is an aggregated profile: it keeps no own peak for {', '.join(unjudged)}, "
                          "whose peak the budget limits")
    return profile, budget, evaluation


def _print_verdict(args, profile, budget, evaluation) -> int:
    from .. import budget as hb

    for message in evaluation.warnings:
        print(f"heaptype: warning: {message}", file=sys.stderr)
    table = ["  " + line for line in hb.render_table(
        hb.MEASURED_HEADER, hb.evaluation_rows(evaluation, evaluation.shown_labels(budget)), numeric=(1, 2, 3, 4))]
    if evaluation.passed:
        if not args.quiet:
            checked = len(evaluation.limits)
            print(f"heaptype check: {budget.test}: within budget ({checked} row{'' if checked == 1 else 's'} checked, "
                  f"profile {args.profile})")
            print("\n".join(table))
        return 0
    print(hb.failure_text(evaluation, call_paths=hb.profile_call_paths(profile), full_names=args.full_names))
    print("  measured:")
    print("\n".join("    " + line for line in hb.measured_lines(evaluation, budget, full_names=args.full_names)))
    return EXIT_OVER_BUDGET


def _load_budgets(path: str | None) -> hb.BudgetFile:
    from .. import budget as hb
    if path is None:
        found = hb.find_budget_file(Path.cwd())
        if found is None:
            raise CommandError(f"check: no budget file: pass --budget FILE (or create {hb.DEFAULT_FILE} here)")
        path = str(found)
    try:
        return hb.load_budget_file(path)
    except hb.BudgetError as e:
        raise CommandError(str(e)) from None


def choose_budget(budgets: hb.BudgetFile, test: str | None, profile) -> hb.Budget:
    """The budget of --test NAME; without it, of the file's only test, or of the test
    whose program wrote the profile. A name no entry matches gets [defaults] only, with
    a warning: a CTest loop may check every test against one file."""
    from .. import budget as hb
    if test is not None:
        aliases = case_aliases(test)
        entry = next((t for t in budgets.command_tests() if t.name == test), None)
        inherited = [t for t in budgets.command_tests() if t.name in aliases]
        matched = entry is not None or bool(inherited) or any(
            t.is_pattern and hb.name_matches(t.name, name) for t in budgets.tests for name in (test, *aliases))
        if not matched:
            close = hb.close_names(test, budgets.entry_names())
            hint = f" (close names: {', '.join(close)})" if close else ""
            print(f"heaptype: warning: no [[tests]] entry of {budgets.path} matches '{test}'{hint}: "
                  "only [defaults] apply", file=sys.stderr)
        return budgets.budget_for(test, entry, aliases, inherited)
    commands = budgets.command_tests()
    if not budgets.tests:
        return budgets.budget_for(Path(profile.executable).name or "profile")
    if len(budgets.tests) == 1 and commands:
        return budgets.budget_for(commands[0].name, commands[0])
    by_program = [t for t in commands if _same_program(t, budgets.directory, profile.executable)]
    if len(by_program) == 1:
        return budgets.budget_for(by_program[0].name, by_program[0])
    raise CommandError(f"check: {budgets.path} has {len(budgets.tests)} tests: choose one with --test NAME "
                       f"({', '.join(budgets.entry_names()[:10])})")


def case_aliases(test: str) -> tuple[str, ...]:
    """A GoogleTest case checked on its own, `unit[Suite.Case]` (the Bazel budget test's
    and `[ctest] gtest_split`'s name for it), is budgeted as `unit` too."""
    base, bracket, rest = test.partition("[")
    return (base,) if bracket and base and rest.endswith("]") else ()


def _same_program(entry: hb.TestEntry, directory: Path, executable: str) -> bool:
    program = entry.command[0] if entry.command else ""
    candidate = (directory / program) if "/" in program else Path(program)
    try:
        return bool(executable) and os.path.samefile(candidate, executable)
    except OSError:
        return False
