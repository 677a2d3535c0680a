"""The budget engine (heaptype.budget): sizes, the budget file and its error messages,
type matching, evaluation, failure text, baselines and thresholds.

No native program here: profiles are stood in for by their figures. The plugin and
`heaptype check` tests run the same engine on real profiles.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from heaptype import budget as hb

DATA = Path(__file__).resolve().parents[1] / "data" / "budget"


def write(tmp_path: Path, text: str, name: str = "heap-budget.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def load_error(tmp_path: Path, text: str, name: str = "heap-budget.toml") -> str:
    path = write(tmp_path, text, name)
    with pytest.raises(hb.BudgetError) as error:
        hb.load_budget_file(path)
    return str(error.value)


def figures(**rows: tuple[int, int, int, int]) -> dict[str, hb.Figures]:
    """Figures by label: name=(peak, bytes, allocations, leaked); `untyped` and `total`
    stand for the special rows."""
    special = {"untyped": hb.UNTYPED, "total": hb.TOTAL}
    return {special.get(name, name.replace("__", "::")): hb.Figures(*values) for name, values in rows.items()}


# --- sizes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    (0, 0), (4096, 4096), ("4096", 4096), ("512 B", 512), ("512B", 512),
    ("64 KiB", 65536), ("64KiB", 65536), ("64 kib", 65536), ("64 KB", 65536), ("64kb", 65536),
    ("1 MiB", 1 << 20), ("1 MB", 1 << 20), ("1.5 MiB", 1572864), ("2 GiB", 2 << 30), ("2 GB", 2 << 30),
    ("1 TiB", 1 << 40), ("1_000 B", 1000), ("0.5 KiB", 512), ("1.3 KiB", 1331),
])
def test_sizes_are_1024_based_whatever_the_spelling(text, expected):
    assert hb.parse_size(text) == expected


@pytest.mark.parametrize("value, message", [
    ("-1 KiB", "'-1 KiB': a size cannot be negative"),
    (-5, "-5: a size cannot be negative"),
    ("12 XB", "'12 XB' is not a size: a size is a whole number of bytes, or a string with a unit: B, KiB"),
    ("KiB", "'KiB' is not a size"),
    ("", "'' is not a size"),
    ("1.2.3 MB", "'1.2.3 MB' is not a size"),
    (True, "True is not a size"),
    (1.5, "1.5 is not a size"),
])
def test_bad_sizes_say_what_a_size_is(value, message):
    with pytest.raises(ValueError) as error:
        hb.parse_size(value)
    assert str(error.value).startswith(message)


def test_counts_are_whole_and_not_negative():
    assert hb.parse_count(20000) == 20000
    assert hb.parse_count("20_000") == 20000
    with pytest.raises(ValueError, match=r"^-3: a count cannot be negative$"):
        hb.parse_count(-3)
    with pytest.raises(ValueError, match=r"^'many' is not a count: use a whole number"):
        hb.parse_count("many")
    with pytest.raises(ValueError, match=r"is not a count"):
        hb.parse_count("64 KiB")


def test_size_display_matches_the_report():
    assert [hb.format_size(n) for n in (0, 1023, 1024, 65536, 80000, 1 << 20, 1572864)] == \
        ["0 B", "1023 B", "1 KiB", "64 KiB", "78.1 KiB", "1 MiB", "1.5 MiB"]
    assert hb.format_exact("peak", 80000) == "78.1 KiB (80,000 B)"
    assert hb.format_exact("peak", 72) == "72 B"
    assert hb.format_exact("allocations", 25000) == "25,000"


# --- the budget file ----------------------------------------------------------------------------

COMPLETE = """
[defaults]                      # every typed row of every test
leaked = 0
timeout = 60

[defaults.regression]
peak = "5%"

[[tests]]
name = "alloc_bench"
command = ["build/alloc_bench", "10000", "0", "0", "0"]

[tests.types."Small"]
peak = "64 KiB"
allocations = 20000
bytes = "1 MiB"
leaked = 0

[tests.types."std::vector<*>"]
peak = "1 MiB"

[[tests]]
name = "quick"
command = "build/quick --fast 'two words'"
cwd = "build"
env = { OMP_NUM_THREADS = "1", LEVEL = "3" }
returncode = 3
timeout = 5
types."(untyped)" = { peak = "2 MiB" }
regression = { allocations = 100 }
"""


# Pieces a hostile budget file is made of: wrong types, deep or unclosed nesting,
# odd keys and bytes.
HOSTILE_PIECES = ["[", "]", "{", "}", "[[", "]]", "= 1", "= [1, 2]", "= {A = 1}", "= true", "= -1", "= 1e999",
                  '= "-5 KiB"', '= "1 PiB"', "= nan", "\"\"\"", "'", "#", "\\u0000", "\n[tests]\n",
                  "\n[[tests]]\n", "types.", "x.y.z", "[" * 300, "{a = " * 300, "\udcff", "\u00e9", "\t", "\n"]


@pytest.mark.parametrize("seed", range(4))
def test_mutated_budget_files_raise_budget_errors_only(tmp_path, seed):
    """Random cuts, insertions and duplications of a complete file: each one loads, or
    raises one BudgetError naming the file; nothing else escapes (no RecursionError,
    TypeError, KeyError...)."""
    import random

    rng = random.Random(seed)
    base = textwrap.dedent(COMPLETE).lstrip("\n")
    path = tmp_path / "heap-budget.toml"
    loaded = failed = 0
    for _ in range(250):
        text = base
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(text) + 1)
            choice = rng.random()
            if choice < 0.5:
                text = text[:at] + rng.choice(HOSTILE_PIECES) + text[at:]
            elif choice < 0.8:
                text = text[:at] + text[at + rng.randint(1, 30):]
            else:
                line = rng.choice(text.splitlines() or [""])
                text = text[:at] + "\n" + line + "\n" + text[at:]
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        try:
            hb.load_budget_file(path)
            loaded += 1
        except hb.BudgetError as e:
            assert str(e).startswith(f"{path}"), str(e)
            assert "\n" not in str(e), str(e)
            failed += 1
    assert loaded and failed  # the mutations reach both outcomes


def test_the_issue_example_parses_completely(tmp_path):
    path = write(tmp_path, COMPLETE)
    budgets = hb.load_budget_file(path)
    assert [t.name for t in budgets.tests] == ["alloc_bench", "quick"]
    bench, quick = budgets.tests
    assert bench.command == ["build/alloc_bench", "10000", "0", "0", "0"]
    assert bench.cwd == tmp_path and bench.returncode == 0 and bench.line == 8
    assert quick.command == ["build/quick", "--fast", "two words"]
    assert quick.cwd == tmp_path / "build"
    assert quick.env == {"OMP_NUM_THREADS": "1", "LEVEL": "3"}
    assert (quick.returncode, quick.timeout) == (3, 5.0)
    budget = budgets.budget_for("alloc_bench", bench)
    assert (budget.timeout, budget.default_timeout) == (None, 60.0)
    assert {k: v.value for k, v in budget.limits_for("Small").items()} == \
        {"peak": 65536, "bytes": 1 << 20, "allocations": 20000, "leaked": 0}
    assert {k: v.value for k, v in budget.limits_for("std::vector<int>").items()} == {"peak": 1 << 20, "leaked": 0}
    assert budget.limits_for("Small")["peak"].origin == 'heap-budget.toml:13 [tests.types.Small] peak'
    assert budget.limits_for("Token")["leaked"].origin == "heap-budget.toml:2 [defaults] leaked"
    assert budget.thresholds["peak"].text() == "5%" and budget.thresholds["peak"].percent
    quick_budget = budgets.budget_for("quick", quick)
    assert quick_budget.timeout == 5.0
    assert quick_budget.limits_for(hb.UNTYPED)["peak"].value == 2 << 20
    assert quick_budget.limits_for(hb.UNTYPED)["peak"].origin == \
        'heap-budget.toml:28 [tests.types."(untyped)"] peak'
    assert quick_budget.thresholds["allocations"].value == 100 and not quick_budget.thresholds["allocations"].percent


def test_pyproject_tool_heaptype_is_a_budget_file(tmp_path):
    path = write(tmp_path, """
        [project]
        name = "x"

        [tool.heaptype.defaults]
        leaked = 0

        [[tool.heaptype.tests]]
        name = "app"
        command = ["app"]
        [tool.heaptype.tests.types."Foo"]
        peek = 1
        """, "pyproject.toml")
    assert hb.find_budget_file(tmp_path) == path
    with pytest.raises(hb.BudgetError) as error:
        hb.load_budget_file(path)
    assert str(error.value) == (f"{path}:11:1: unknown key 'peek' in [tool.heaptype.tests.types.Foo]: "
                                "did you mean 'peak'?")
    path.write_text(path.read_text().replace("peek", "peak"))
    assert hb.load_budget_file(path).tests[0].rules[0].limits["peak"].origin == \
        "pyproject.toml:11 [tool.heaptype.tests.types.Foo] peak"


def test_default_file_lookup_prefers_heap_budget_toml(tmp_path):
    assert hb.find_budget_file(tmp_path) is None
    write(tmp_path, "[project]\nname = 'x'\n", "pyproject.toml")
    assert hb.find_budget_file(tmp_path) is None
    budget_file = write(tmp_path, "[defaults]\nleaked = 0\n")
    assert hb.find_budget_file(tmp_path) == budget_file


# --- bad budget files: one message, with file, line and column --------------------------------------

def test_malformed_toml_names_file_line_and_column():
    path = DATA / "malformed.toml"
    with pytest.raises(hb.BudgetError) as error:
        hb.load_budget_file(path)
    assert str(error.value) == f"{path}:7:11: invalid TOML: Expected newline or end of document after a statement"


def test_malformed_toml_at_the_end_of_the_file(tmp_path):
    message = load_error(tmp_path, '[[tests]]\nname = "a"\ncommand = ["x",\n')
    assert message == f"{tmp_path / 'heap-budget.toml'}:3:16: invalid TOML: Invalid value (at the end of the file)"


@pytest.mark.parametrize("text, position, message", [
    ("[defaults]\nleakd = 0\n", "2:1", "unknown key 'leakd' in [defaults]: did you mean 'leaked'?"),
    ("[[test]]\nname = 'a'\n", "1:3", "unknown key 'test' in the budget file: did you mean 'tests'?"),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\ncomand = ['y']\n", "4:1",
     "unknown key 'comand' in test 'a': did you mean 'command'?"),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\n[tests.types.'Foo']\npeek = 1\n", "5:1",
     "unknown key 'peek' in [tests.types.Foo]: did you mean 'peak'?"),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\ntypes = { Foo = { peak = 1, alocations = 2 } }\n", "4:29",
     "unknown key 'alocations' in [tests.types.Foo]: did you mean 'allocations'?"),
    ("[defaults.regression]\npeek = '5%'\n", "2:1",
     "unknown key 'peek' in [defaults.regression]: did you mean 'peak'?"),
    ("[ctest]\nbuild-dir = 'build'\n", "2:1", "unknown key 'build-dir' in [ctest]: did you mean 'build_dir'?"),
    ("[defaults]\nxyz = 0\n", "2:1",
     "unknown key 'xyz' in [defaults]: expected one of: peak, bytes, allocations, leaked, mismatched_deletes, mismatched_frees, timeout, types, regression"),
])
def test_unknown_keys_are_named_with_the_closest_key(tmp_path, text, position, message):
    assert load_error(tmp_path, text) == f"{tmp_path / 'heap-budget.toml'}:{position}: {message}"


@pytest.mark.parametrize("text, position, message", [
    ("[defaults]\nleaked = -1\n", "2:1", "leaked: -1: a count cannot be negative".replace("count", "size")),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\n[tests.types.Foo]\npeak = '-64 KiB'\n", "5:1",
     "peak: '-64 KiB': a size cannot be negative"),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\n[tests.types.Foo]\n  peak = '64 KBytes'\n", "5:3",
     "peak: '64 KBytes' is not a size: " + hb.SIZE_HELP),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\n[tests.types.Foo]\nallocations = -2\n", "5:1",
     "allocations: -2: a count cannot be negative"),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\n[tests.types.Foo]\nallocations = '1 KiB'\n", "5:1",
     "allocations: '1 KiB' is not a count: use a whole number, e.g. 20000"),
    ("[defaults.regression]\npeak = '-5%'\n", "2:1", "peak: '-5%': a threshold cannot be negative"),
    ("[defaults.regression]\npeak = 'five%'\n", "2:1", "peak: 'five%' is not a percentage (e.g. \"5%\")"),
])
def test_negative_or_unparsable_sizes_name_their_line(tmp_path, text, position, message):
    assert load_error(tmp_path, text) == f"{tmp_path / 'heap-budget.toml'}:{position}: {message}"


@pytest.mark.parametrize("text, position, message", [
    ("[[tests]]\ncommand = ['x']\n", "1:3", "[[tests]] number 1 needs a name: name = \"...\" (it becomes the pytest item)"),
    ("[[tests]]\nname = 'a'\n", "1:3",
     "test 'a' has no command: give it `command = [...]`, or add a [ctest] table whose tests it budgets"),
    ("[[tests]]\nname = 'a'\ncommand = []\n", "3:1",
     "command of test 'a' must be a non-empty array of strings, e.g. command = [\"build/app\", \"--quick\"]"),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\n[[tests]]\nname = 'a'\ncommand = ['y']\n", "5:1",
     "a second test named 'a' (the first is at heap-budget.toml:1)"),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\n[tests.types.'(untypd)']\npeak = 1\n", "4:14",
     "'(untypd)' is not a type: the special rows are \"(untyped)\" and \"(total)\"; did you mean '(untyped)'?"),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\ntimeout = 0\n", "4:1",
     "timeout must be a positive number of seconds, not 0"),
    ("tests = 3\n", "1:1", "'tests' must be an array of tables: write each test as [[tests]]"),
    ("[ctest]\ntests = 'a*'\n", "1:2", "[ctest] needs build_dir = \"...\": the CMake build tree whose tests to run"),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\nenv = { A = true }\n", "4:9",
     "env of test 'a' must be a table of strings, e.g. env = { OMP_NUM_THREADS = \"1\" }, not A = a boolean"),
    ("[[tests]]\nname = 'a'\ncommand = ['x']\nenv = { B = 'b', A = 1 }\n", "4:18",
     "env of test 'a' must be a table of strings, e.g. env = { OMP_NUM_THREADS = \"1\" }, not A = a number"),
    ("[[tests]]\nname = 'a'\ncommand = [1, 2]\n", "3:1",
     "command of test 'a' must be a non-empty array of strings, e.g. command = [\"build/app\", \"--quick\"]"),
])
def test_structural_mistakes_are_explained(tmp_path, text, position, message):
    assert load_error(tmp_path, text) == f"{tmp_path / 'heap-budget.toml'}:{position}: {message}"


@pytest.mark.parametrize("value", ["[" * 5000 + "]" * 5000, "{a = " * 5000 + "1" + "}" * 5000])
def test_deep_nesting_is_an_error_naming_its_line(tmp_path, value):
    text = f"[defaults]\npeak = '1 MiB'\n[[tests]]\nname = 'a'\ncommand = ['x']\nargs = {value}\n"
    assert load_error(tmp_path, text) == (f"{tmp_path / 'heap-budget.toml'}:6: arrays or inline tables nested "
                                          "more than 100 deep (a budget file never needs that many)")


def test_a_missing_budget_file_is_one_line(tmp_path):
    with pytest.raises(hb.BudgetError) as error:
        hb.load_budget_file(tmp_path / "nope.toml")
    assert str(error.value) == f"{tmp_path / 'nope.toml'}: no such budget file"


def test_the_locator_follows_arrays_of_tables_and_inline_tables():
    locator = hb.TomlLocator(textwrap.dedent("""\
        [[tests]]
        name = "a"
        [[tests]]
        name = "b"   # the second
        [tests.types."std::map<int, int>"]
        peak = 1
        x = { y = 1, z = { w = "a = b" } }
        """))
    assert locator.find(("tests", 1, "name")) == (4, 1)
    assert locator.find(("tests", 0, "name")) == (2, 1)
    assert locator.find(("tests", 1, "types", "std::map<int, int>", "peak")) == (6, 1)
    assert locator.find(("tests", 1, "types", "std::map<int, int>", "x", "z", "w")) == (7, 20)
    assert locator.find(("tests", 1, "types", "std::map<int, int>", "nope")) == (5, 14)  # its table


# --- matching type names -------------------------------------------------------------------------

@pytest.mark.parametrize("pattern, label, expected", [
    ("Small", "Small", True),
    ("Small", "SmallThing", False),
    ("std::vector<*>", "std::vector<int>", True),
    ("std::vector<*>", "std::vector<std::string>", True),
    ("std::vector<*>", "std::map<int, int>", False),
    ("std::_Rb_tree_node<*>", "std::_Rb_tree_node<std::pair<int const, int>>", True),
    ("int [MEM_TYPE_IMGBUF]", "int [MEM_TYPE_IMGBUF]", True),   # brackets are literal
    ("int [MEM_TYPE_IMGBUF]", "int M", False),
    ("*", "Small", True),
    ("*", hb.UNTYPED, False),                                    # "*" covers typed rows only
    ("*", hb.TOTAL, False),
    ("(*", hb.UNTYPED, False),
    (hb.UNTYPED, hb.UNTYPED, True),
    (hb.UNTYPED, "Small", False),
    (hb.TOTAL, hb.TOTAL, True),
    (None, "Small", True),                                       # [defaults]
    (None, hb.UNTYPED, False),
    (None, hb.TOTAL, False),
])
def test_type_patterns(pattern, label, expected):
    assert hb.type_matches(pattern, label) is expected


def test_the_most_specific_pattern_sets_each_limit(tmp_path):
    budgets = hb.load_budget_file(write(tmp_path, """
        [defaults]
        leaked = 0
        peak = "1 MiB"
        [defaults.types."std::vector<int>"]
        peak = "4 KiB"

        [[tests]]
        name = "t"
        command = ["x"]
        [tests.types."*"]
        peak = "512 KiB"
        allocations = 100
        [tests.types."std::*"]
        peak = "256 KiB"
        [tests.types."std::vector<*>"]
        peak = "128 KiB"
        [tests.types."std::vector<int>"]
        allocations = 7
        """))
    budget = budgets.budget_for("t", budgets.tests[0])
    values = lambda label: {k: v.value for k, v in budget.limits_for(label).items()}
    assert values("Small") == {"peak": 512 << 10, "allocations": 100, "leaked": 0}
    assert values("std::map<int, int>") == {"peak": 256 << 10, "allocations": 100, "leaked": 0}
    assert values("std::vector<char>") == {"peak": 128 << 10, "allocations": 100, "leaked": 0}
    # an exact name beats every glob; for the field it does not set, the next one decides
    assert values("std::vector<int>") == {"peak": 4 << 10, "allocations": 7, "leaked": 0}
    assert values(hb.UNTYPED) == {}


def test_defaults_leave_the_untyped_row_alone_unless_it_is_named(tmp_path):
    """Every program that prints keeps stdout's buffer (untyped, 1-4 KiB) live at exit:
    `[defaults] leaked = 0` must not fail them all."""
    budgets = hb.load_budget_file(write(tmp_path, """
        [defaults]
        leaked = 0
        [[tests]]
        name = "prints"
        command = ["x"]
        [[tests]]
        name = "strict"
        command = ["x"]
        [tests.types."(untyped)"]
        leaked = 0
        """))
    measured = figures(total=(80000, 80000, 3, 4096), untyped=(76800, 76800, 2, 4096), Small=(16, 16, 1, 0))
    assert hb.evaluate(budgets.budget_for("prints", budgets.tests[0]), measured).passed
    strict = hb.evaluate(budgets.budget_for("strict", budgets.tests[1]), measured)
    assert [(v.type, v.field, v.measured, v.limit.value) for v in strict.violations] == \
        [(hb.UNTYPED, "leaked", 4096, 0)]


def test_ctest_entries_without_command_budget_tests_by_name_glob(tmp_path):
    budgets = hb.load_budget_file(write(tmp_path, """
        [ctest]
        build_dir = "build"
        exclude = ["slow_*"]
        gtest_split = ["unit_*"]
        [[tests]]
        name = "unit_*"
        [tests.types."*"]
        peak = "1 MiB"
        [[tests]]
        name = "unit_parser"
        [tests.types."*"]
        peak = "2 MiB"
        [[tests]]
        name = "unit_parser[Parse.Big]"
        [tests.types."*"]
        peak = "3 MiB"
        """))
    assert budgets.ctest.build_dir == tmp_path / "build"
    assert (budgets.ctest.include, budgets.ctest.exclude, budgets.ctest.gtest_split) == (["*"], ["slow_*"], ["unit_*"])
    peak = lambda name, *aliases: budgets.budget_for(name, aliases=aliases).limits_for("Foo")["peak"].value
    assert peak("unit_lexer") == 1 << 20
    assert peak("unit_parser") == 2 << 20
    assert peak("unit_parser[Parse.Small]", "unit_parser") == 2 << 20
    assert peak("unit_parser[Parse.Big]", "unit_parser") == 3 << 20
    assert budgets.budget_for("integration").limits_for("Foo") == {}


# --- evaluating ------------------------------------------------------------------------------------

def profile_stub(rows, totals):
    """What hb.measure reads of a heaptype.Profile."""
    groups = [SimpleNamespace(type=t, peak_bytes=p, bytes=b, allocations=a, live_bytes=l, live_blocks=int(l > 0))
              for t, (p, b, a, l) in rows.items()]
    return SimpleNamespace(
        analysis=lambda infer: SimpleNamespace(types=groups + [SimpleNamespace(
            type="Unused", peak_bytes=0, bytes=0, allocations=0, live_bytes=0, live_blocks=0)]),
        totals=SimpleNamespace(peak_bytes=totals[0], bytes=totals[1], allocations=totals[2], live_bytes=totals[3]))


def test_measure_names_the_untyped_row_and_adds_the_total():
    measured = hb.measure(profile_stub({None: (10, 20, 2, 4), "Small": (16, 32, 2, 0)}, (26, 52, 4, 4)))
    assert measured == {hb.UNTYPED: hb.Figures(10, 20, 2, 4), "Small": hb.Figures(16, 32, 2, 0),
                        hb.TOTAL: hb.Figures(26, 52, 4, 4)}


def test_an_exceeded_budget_reports_type_limit_measure_and_excess(tmp_path):
    budgets = hb.load_budget_file(write(tmp_path, """
        [defaults]
        leaked = 0
        [[tests]]
        name = "bench"
        command = ["x"]
        [tests.types."Small"]
        peak = "64 KiB"
        allocations = 4000
        [tests.types."(total)"]
        peak = "1 MiB"
        """))
    measured = figures(total=(100000, 200000, 5004, 72), untyped=(1000, 1000, 1, 0),
                       Small=(80000, 80000, 5000, 0), Leaky=(72, 72, 3, 72))
    evaluation = hb.evaluate(budgets.budget_for("bench", budgets.tests[0]), measured, profile_path="/p/x.htp")
    assert [(v.type, v.field, v.measured, v.limit.value, v.over) for v in evaluation.violations] == [
        ("Leaky", "leaked", 72, 0, 72), ("Small", "peak", 80000, 65536, 14464),
        ("Small", "allocations", 5000, 4000, 1000)]
    assert evaluation.shown_labels(budgets.budget_for("bench", budgets.tests[0])) == [hb.TOTAL, "Leaky", "Small"]
    text = hb.failure_text(evaluation, call_paths=lambda t, f: [hb.CallPath(f, ("main", "run", "make_small"))] if t == "Small" else [])
    assert text == textwrap.dedent("""\
        heap budget exceeded: bench
          Leaky: leaked 72 B > limit 0 B, over by 72 B
              limit set at heap-budget.toml:2 [defaults] leaked
              call paths: none recorded for this type
          Small: peak live 78.1 KiB (80,000 B) > limit 64 KiB (65,536 B), over by 14.1 KiB (14,464 B) (+22.1%)
              limit set at heap-budget.toml:7 [tests.types.Small] peak
          Small: allocations 5,000 > limit 4,000, over by 1,000 (+25.0%)
              limit set at heap-budget.toml:8 [tests.types.Small] allocations
              top call paths of Small:
                1. peak: main > run > make_small
          profile kept: /p/x.htp
              heaptype report /p/x.htp""")
    assert "call paths: not recorded in this profile" in hb.failure_text(evaluation)


def test_a_cut_short_profile_skips_leaks_and_says_so():
    budget = hb.budget_from_mapping("t", {"leaked": 0, "types": {"Small": {"peak": 10}}}, "t")
    measured = figures(total=(100, 100, 2, 100), Small=(100, 100, 2, 100))
    evaluation = hb.evaluate(budget, measured, complete=False)
    assert [(v.field, v.measured) for v in evaluation.violations] == [("peak", 100)]
    assert "`leaked` limits are not checked" in hb.failure_text(evaluation)


def test_a_budget_for_a_type_that_never_appears_warns_with_close_names():
    budget = hb.budget_from_mapping("t", {"types": {"Smal": {"peak": 10}, "std::vectr<*>": {"peak": 1},
                                                    "Nothing": {"peak": 1}, "*": {"peak": 1 << 30}}}, "here")
    measured = figures(total=(1, 1, 1, 0), Small=(16, 16, 1, 0), std__vector__int=(1, 1, 1, 0))
    measured["std::vector<int>"] = measured.pop("std::vector::int")
    warnings = hb.evaluate(budget, measured).warnings
    assert warnings == [
        "t: budget for type 'Smal' (here types.Smal.peak): the type never appears in the profile; "
        "close type names: Small",
        "t: budget for type 'std::vectr<*>' (here types.std::vectr<*>.peak): the type matches no type in the "
        "profile; close type names: std::vector<int>",
        "t: budget for type 'Nothing' (here types.Nothing.peak): the type never appears in the profile; "
        "the profile has 2 typed rows (heaptype report shows them)",
    ]


def test_a_budget_for_a_type_made_by_make_shared_names_the_rows_that_hold_it():
    """std::make_shared<T> allocates its control block, whose row is named after it:
    a budget for T itself never matches, and the warning names the rows that hold a T
    (shortest first, whole template arguments only) and the glob that budgets them."""
    block = "std::_Sp_counted_ptr_inplace<node_data, std::allocator<node_data>, (__gnu_cxx::_Lock_policy)2>"
    vector = "std::vector<node_data>"
    budget = hb.budget_from_mapping("t", {"types": {"node_data": {"peak": 10}}}, "here")
    measured = figures(total=(1, 1, 1, 0), big_node_data=(1, 1, 1, 0))  # a longer name that is not a T
    for name in (block, vector):
        measured[name] = measured["big_node_data"]
    measured["big_node_data_ref"] = measured.pop("big_node_data")
    warnings = hb.evaluate(budget, measured).warnings
    assert warnings == [
        f"t: budget for type 'node_data' (here types.node_data.peak): the type never appears in the profile; "
        f"it is allocated inside {vector}, {block} (a block that holds one, as std::make_shared's does): budget "
        f"that row, or every such row with '*node_data*'"]


def test_a_later_test_that_holds_the_type_gives_the_hint_its_holders():
    """A session keeps a pattern's hint from its first test; a test whose rows hold the
    type (a make_shared block) after one whose rows do not still names them."""
    block = "std::_Sp_counted_ptr_inplace<node_data, std::allocator<node_data>, (__gnu_cxx::_Lock_policy)2>"
    budget = hb.budget_from_mapping("t", {"types": {"node_data": {"peak": 10}}}, "here")
    hints = {}
    first = hb.evaluate(budget, figures(total=(1, 1, 1, 0), Other=(1, 1, 1, 0)), hints=hints)
    assert first.unmatched[0].holders == ()
    later = figures(total=(1, 1, 1, 0), Other=(1, 1, 1, 0))
    later[block] = later["Other"]
    assert hb.evaluate(budget, later, hints=hints).unmatched[0].holders == (block,)


def test_a_suites_warning_names_the_holders_any_test_found():
    """Under xdist each test's record says what it found; the suite's one warning
    gathers the rows that hold the type from all of them (the first test by name may
    hold none: it never made one)."""
    from heaptype.judge.budget_outputs import unmatched_patterns

    def record(test, holders):
        return {"test": test, "matched": [], "unmatched": [
            {"key": "T\0f:1", "pattern": "T", "origin": "f:1", "close": [], "typed_rows": 3, "holders": holders}]}

    warnings = unmatched_patterns([record("b", ["std::vector<T>"]), record("a", []),
                                   record("c", ["std::_Sp_counted_ptr_inplace<T, std::allocator<void>>"])])
    assert warnings == ["budget for type 'T' (f:1): the type never appears in any of the 3 tests it applies to; "
                        "it is allocated inside std::vector<T>, std::_Sp_counted_ptr_inplace<T, std::allocator<void>> "
                        "(a block that holds one, as std::make_shared's does): budget that row, or every such row "
                        "with '*T*'"]


def test_marker_budgets_are_checked_like_files():
    with pytest.raises(hb.BudgetError) as error:
        hb.budget_from_mapping("t", {"types": {"Small": {"peek": 1}}}, "test_x.py::t: heap_budget marker")
    assert str(error.value) == ("test_x.py::t: heap_budget marker: unknown key 'peek' in types.Small: "
                                "did you mean 'peak'?")
    with pytest.raises(hb.BudgetError) as error:
        hb.budget_from_mapping("t", {"leaked": "-1 B"}, "m")
    assert str(error.value) == "m: leaked: '-1 B': a size cannot be negative"


# --- baselines and thresholds ------------------------------------------------------------------------

@pytest.mark.parametrize("text, field, value, percent", [
    ("peak:5%", "peak", 5.0, True), ("bytes:0.5%", "bytes", 0.5, True), ("peak:64KiB", "peak", 65536, False),
    ("allocations:100", "allocations", 100, False), ("leaked:0", "leaked", 0, False),
])
def test_threshold_options(text, field, value, percent):
    threshold = hb.parse_threshold_option(text)
    assert (threshold.field, threshold.value, threshold.percent) == (field, value, percent)


@pytest.mark.parametrize("text, message", [
    ("peek:5%", "'peek:5%': unknown field 'peek': did you mean 'peak'?"),
    ("peak", "'peak': expected FIELD:AMOUNT with FIELD one of peak, bytes, allocations, leaked"),
    ("peak:", "'peak:': expected FIELD:AMOUNT"),
    ("peak:-5%", "'peak:-5%': '-5%': a threshold cannot be negative"),
    ("allocations:1.5", "'allocations:1.5': '1.5' is not a count"),
])
def test_bad_threshold_options(text, message):
    with pytest.raises(ValueError) as error:
        hb.parse_threshold_option(text)
    assert str(error.value).startswith(message)


def test_compare_fails_growth_past_the_threshold_and_reports_improvements():
    base = figures(total=(200, 200, 20, 0), Grown=(100, 100, 10, 0), Same=(50, 50, 5, 0), Shrunk=(50, 50, 5, 0),
                   Gone=(10, 10, 1, 0))
    now = figures(total=(205, 205, 20, 0), Grown=(110, 110, 11, 0), Same=(50, 50, 5, 0), Shrunk=(40, 40, 4, 0),
                  New=(5, 5, 1, 0))
    thresholds = {"peak": hb.parse_threshold_option("peak:5%")}
    comparison = hb.compare("t", now, base, thresholds)
    assert [(c.type, c.field, c.verdict) for c in comparison.changes] == [
        (hb.TOTAL, "peak", "grew"), (hb.TOTAL, "bytes", "grew"),
        ("Gone", "peak", "gone"),
        ("Grown", "peak", "regressed"), ("Grown", "bytes", "grew"), ("Grown", "allocations", "grew"),
        ("New", "peak", "new"),
        ("Shrunk", "peak", "improved"), ("Shrunk", "bytes", "improved"), ("Shrunk", "allocations", "improved"),
    ]
    assert [c.type for c in comparison.regressions] == ["Grown"]
    assert comparison.regressions[0].text() == \
        "Grown: peak live 110 B vs baseline 100 B: +10 B (+10.0%), > threshold 5% (--heap-compare-fail=peak:5%)"
    assert hb.compare("t", now, None, thresholds).in_baseline is False


def test_thresholds_absolute_and_from_zero():
    absolute = hb.parse_threshold_option("allocations:10")
    assert not absolute.exceeded(100, 110) and absolute.exceeded(100, 111)
    percent = hb.parse_threshold_option("leaked:5%")
    assert percent.exceeded(0, 1)            # a new leak is a regression
    assert not percent.improved(100, 96) and percent.improved(100, 94)


def test_per_test_thresholds_beat_the_command_line_which_beats_defaults(tmp_path):
    budgets = hb.load_budget_file(write(tmp_path, """
        [defaults.regression]
        peak = "1%"
        bytes = "1%"
        allocations = "1%"
        [[tests]]
        name = "noisy"
        command = ["x"]
        regression = { peak = "20%" }
        """))
    cli = {"peak": hb.parse_threshold_option("peak:5%"), "bytes": hb.parse_threshold_option("bytes:5%")}
    budget = budgets.budget_for("noisy", budgets.tests[0]).with_thresholds(cli)
    assert {k: t.text() for k, t in budget.thresholds.items()} == {"peak": "20%", "bytes": "5%", "allocations": "1%"}


def test_baseline_round_trip_is_stable_and_one_type_per_line(tmp_path):
    path = tmp_path / "heap-baseline.json"
    hb.Baseline(path, {"b::test": figures(Zeta=(1, 2, 3, 4), Alpha=(5, 6, 7, 8), untyped=(0, 0, 0, 0)),
                       "a::test": figures(total=(9, 9, 9, 9))}).save()
    assert path.read_text() == textwrap.dedent("""\
        {
          "fields": ["peak", "bytes", "allocations", "leaked"],
          "format": "heaptype-baseline",
          "tests": {
            "a::test": {
              "(total)": [9, 9, 9, 9]
            },
            "b::test": {
              "Alpha": [5, 6, 7, 8],
              "Zeta": [1, 2, 3, 4],
              "(untyped)": [0, 0, 0, 0]
            }
          },
          "version": 2
        }
        """)
    loaded = hb.Baseline.load(path)
    assert loaded.figures("b::test") == figures(Zeta=(1, 2, 3, 4), Alpha=(5, 6, 7, 8), untyped=(0, 0, 0, 0))
    assert loaded.notes == [] and loaded.to_json() == path.read_text()
    assert json.loads(path.read_text())["tests"]["a::test"] == {"(total)": [9, 9, 9, 9]}


def test_a_version_1_baseline_is_compared_as_it_is_with_a_note(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "heaptype-baseline", "version": 1, "tests": {
        "a::test": {"Small": {"allocations": 7, "bytes": 6, "leaked": 8, "peak": 5}}}}))
    loaded = hb.Baseline.load(path)
    assert loaded.figures("a::test") == figures(Small=(5, 6, 7, 8))
    assert loaded.notes == [f"{path} is a version 1 baseline (every type of every test): it is compared as it is; "
                            "--heap-save-baseline rewrites it as version 2 (the totals, the budgeted types and the "
                            "top types of each test)"]


def test_a_baseline_keeps_the_totals_the_budgeted_types_and_the_top_ones():
    measured = figures(total=(900, 900, 9, 0), untyped=(500, 500, 1, 0), Big=(300, 300, 1, 0), Mid=(200, 200, 1, 0),
                       Small=(10, 10, 1, 0), Tiny=(1, 1, 1, 0), Budgeted=(0, 5, 1, 0))
    assert hb.kept_labels(measured, {"Budgeted"}, top=2) == [hb.TOTAL, "Big", "Budgeted", "Mid", hb.UNTYPED]
    assert hb.kept_labels(measured, set(), top=0) == [hb.TOTAL, hb.UNTYPED]


def test_compare_reports_kept_rows_new_to_the_baseline_and_stored_rows_gone():
    now = figures(total=(110, 110, 2, 0), Small=(110, 110, 2, 0), Unkept=(1, 1, 1, 0))
    then = figures(total=(100, 100, 2, 0), Small=(100, 100, 2, 0), Old=(5, 5, 1, 0))
    comparison = hb.compare("t", now, then, {"peak": hb.parse_threshold_option("peak:5%")},
                            kept=[hb.TOTAL, "Small", "Fresh"])
    assert [(c.type, c.field, c.verdict) for c in comparison.changes] == [
        (hb.TOTAL, "peak", "regressed"), (hb.TOTAL, "bytes", "grew"), ("Old", "peak", "gone"),
        ("Small", "peak", "regressed"), ("Small", "bytes", "grew")]


@pytest.mark.parametrize("content, message", [
    ('{"format": "heaptype-baseline",\n "version": 1,,\n}', "{path}:2:15: invalid JSON: Expecting property name"),
    ('{"tests": {}}', "{path}: not a HeapType baseline (no \"format\": \"heaptype-baseline\")"),
    ('{"format": "heaptype-baseline", "version": 9}', "{path}: baseline version 9 is not supported"),
    ('{"format": "heaptype-baseline", "version": 1, "tests": {"t": 3}}',
     "{path}: malformed baseline: expected tests -> type -> figures"),
])
def test_bad_baselines_are_one_line(tmp_path, content, message):
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(hb.BudgetError) as error:
        hb.Baseline.load(path)
    assert str(error.value).startswith(message.format(path=path))
    with pytest.raises(hb.BudgetError, match="no such baseline file .write it with --heap-save-baseline."):
        hb.Baseline.load(tmp_path / "missing.json")


def test_gtest_listing_is_parsed_like_googletest_prints_it():
    from heaptype.pytest_plugin import parse_gtest_list

    listing = textwrap.dedent("""\
        Running main() from gtest_main.cc
        Math.
          Add
          DISABLED_Slow
        Typed/0.  # TypeParam = int
          Grows
        Param/Sizes.
          Fits/0  # GetParam() = 1
          Fits/1  # GetParam() = 64
        DISABLED_Off.
          Never
        """)
    assert parse_gtest_list(listing) == ["Math.Add", "Typed/0.Grows", "Param/Sizes.Fits/0", "Param/Sizes.Fits/1"]


def test_shards_deal_out_the_cases_as_googletest_does():
    """The n-th case goes to shard n % total (GoogleTest's ShouldRunTestOnShard): the
    shards are disjoint and together hold every case once, in listing order."""
    from heaptype.run.gtest import shard_cases

    cases = [f"S.C{n}" for n in range(7)]
    shards = [shard_cases(cases, index, 3) for index in range(3)]
    assert shards == [["S.C0", "S.C3", "S.C6"], ["S.C1", "S.C4"], ["S.C2", "S.C5"]]
    assert sorted(case for shard in shards for case in shard) == cases
    assert shard_cases(cases, 0, 1) == cases
    assert shard_cases(cases[:2], 2, 3) == []
    with pytest.raises(ValueError):
        shard_cases(cases, 3, 3)


@pytest.mark.parametrize("name, folded", [
    ("std::map<std::__cxx11::basic_string<char>, int>", "std::map<…>"),
    ("std::vector<int>", "std::vector<int>"),                       # short lists stay whole
    ("std::_Rb_tree_node<std::pair<int const, int>>", "std::_Rb_tree_node<…>"),
    ("void std::vector<Record, std::allocator<Record>>::reserve(unsigned long)",
     "void std::vector<…>::reserve(unsigned long)"),
    ("bool operator<(Key const&, Key const&)", "bool operator<(Key const&, Key const&)"),
    ("std::ostream& operator<<(std::ostream&, Point const&)", "std::ostream& operator<<(std::ostream&, Point const&)"),
    ("Small", "Small"),
])
def test_long_template_argument_lists_fold(name, folded):
    assert hb.fold_templates(name) == folded


def test_call_paths_fold_across_lines_before_a_frame_that_would_pass_the_width():
    frames = ["main", "run_all_tests()", "Suite5_Case2_Test::TestBody()", "leak_widget()"]
    assert hb.fold_path(frames, prefix="    1. 40 B leaked: ", indent=9, width=60) == [
        "    1. 40 B leaked: main > run_all_tests()",
        "         > Suite5_Case2_Test::TestBody() > leak_widget()"]
    assert hb.fold_path(frames, prefix="", indent=0) == [" > ".join(frames)]
