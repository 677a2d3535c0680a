"""Bad input to the `heaptype` command: every error is one line,
`heaptype: error: FILE: what`, exit status 2, never a traceback; damage found while
reading events is a warning, never silent."""

from __future__ import annotations

import pytest

from heaptype import _core, cli, load

SITE = 2 << 2 | 2  # a SITE record's head (see src/format/profile_format.hpp)


def heaptype(capsys, *args) -> tuple[int, str, str]:
    status = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def good(tmp_path):
    """A finished profile: one 16-byte allocation of thread 1."""
    b = _core.ProfileBuilder()
    b.raw_chunk(4, 1, bytes([SITE, 16, 1, 0, 0x10, 0, 1]))
    b.end(1, 0)
    path = tmp_path / "good.htp"
    path.write_bytes(b.finish())
    return path


def bad_file(tmp_path, name: str, data: bytes | None):
    path = tmp_path / name
    if data is None:
        path.mkdir()
    else:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize("name, data, what", [
    ("missing.htp", "absent", "no such profile file"),
    ("dir.htp", None, "is a directory"),
    ("empty.htp", b"", "empty file, not a HeapType profile"),
    ("magic.htp", b"NOTAHEAP" + bytes(56), "not a HeapType profile (no HEAPTYPE magic at the start)"),
    ("version.htp", b"HEAPTYPE" + (9).to_bytes(4, "little") + bytes(52),
     "profile format version 9, this HeapType reads versions 2 to 4"),
    ("header.htp", b"HEAPTYPE" + (2).to_bytes(4, "little") + (4096).to_bytes(4, "little") + bytes(48),
     "damaged header (header size 4096 is past the end of the 64-byte file)"),
])
@pytest.mark.parametrize("command", [["report"], ["report", "--by", "callpath"], ["export", "--format", "folded"],
                                     ["timeline"], ["leaks"], ["html"]])
def test_a_file_that_is_no_profile_is_one_error_line(tmp_path, capsys, name, data, what, command):
    path = tmp_path / name if data == "absent" else bad_file(tmp_path, name, data)
    status, out, err = heaptype(capsys, command[0], path, *command[1:])
    assert (status, out, err) == (2, "", f"heaptype: error: {path}: {what}\n")


def test_an_end_written_before_its_cause_was_kept_is_an_exit(good, capsys):
    """END chunks of five fields (older runtimes; the builder writes them so) end at exit."""
    profile = load(good)
    assert profile.complete and profile.end_cause == "exit"
    status, out, _ = heaptype(capsys, "report", good)
    assert status == 0 and "  at exit    16 B still live in 1 blocks" in out


def test_a_profile_cut_short_loads_what_it_holds_with_a_warning(tmp_path, capsys, good):
    data = good.read_bytes()
    path = bad_file(tmp_path, "cut.htp", data[:70])
    status, out, err = heaptype(capsys, "report", path)
    assert status == 0 and "allocated  0 blocks" in out
    assert err == (f"heaptype: warning: {path}: the file ends inside a chunk header at offset 64; loaded the "
                   "64 bytes before it (6 bytes dropped)\n")
    # what was live when it ended is what its last records say, not what lived at an exit
    assert "  at cut-off 0 B still live in 0 blocks" in out and "at exit" not in out
    assert load(path).end_cause == "cut-off"


def test_damaged_events_are_a_warning_after_the_report(tmp_path, capsys):
    b = _core.ProfileBuilder()
    b.raw_chunk(4, 1, bytes([SITE, 16, 1, 0, 0x10, 0, 1, 9 << 1 | 1]))  # an ALLOC at undefined site 9
    b.end(1, 0)
    path = bad_file(tmp_path, "damaged.htp", b.finish())
    status, out, err = heaptype(capsys, "report", path)
    assert status == 0 and "allocated  1 blocks, 16 B in all" in out
    assert err == f"heaptype: warning: {path}: damaged events: thread 1: allocation at undefined site 9\n"


@pytest.mark.parametrize("option, what", [
    (["--time", "x:y"], "report: argument --time: 'x:y': could not convert string to float: 'x'"),
    (["--time", "5:1"], "report: argument --time: '5:1': LOW is larger than HIGH"),
    (["--time=-1:"], "report: argument --time: '-1:': -1 is not a time since the start (seconds, 0 or more)"),
    (["--time", "nan:"], "report: argument --time: 'nan:': nan is not a time since the start (seconds, 0 or more)"),
    (["--time", "5"], "report: argument --time: expected LOW:HIGH (either may be empty), not '5'"),
    (["--size", "1Q:"], "report: argument --size: '1Q:': '1Q' is not a size"),
    (["--size", "2KiB:1KiB"], "report: argument --size: '2KiB:1KiB': LOW is larger than HIGH"),
    (["--at", "never"], "report: argument --at: expected 'peak' or a time in seconds (0 or more), not 'never'"),
    (["--at=-5"], "report: argument --at: expected 'peak' or a time in seconds (0 or more), not '-5'"),
    (["--top", "0"], "report: argument --top: must be a positive number, not 0"),
    (["--by", "colour"], "report: argument --by: invalid choice: 'colour'"),
])
def test_bad_option_values_are_one_error_line(capsys, good, option, what):
    with pytest.raises(SystemExit) as exit_status:
        cli.main(["report", str(good), *option])
    out, err = capsys.readouterr()
    assert (exit_status.value.code, out) == (2, "")
    assert err.startswith(f"heaptype: error: {what}") and err.endswith("(see `heaptype report --help`)\n")
    assert err.count("\n") == 1


def test_an_output_file_that_cannot_be_written_is_one_error_line(tmp_path, capsys, good):
    target = tmp_path / "no-such-dir" / "out.folded"
    status, out, err = heaptype(capsys, "export", good, "--format", "folded", "-o", target)
    assert (status, err) == (2, f"heaptype: error: {target}: No such file or directory\n")
    target = tmp_path / "no-such-dir" / "out.html"
    status, out, err = heaptype(capsys, "html", good, "-o", target)
    assert (status, err) == (2, f"heaptype: error: {target}: No such file or directory\n")


@pytest.mark.parametrize("text, what", [
    ("[defaults]\nleaked = [[[[\n", "{path}:2:14: invalid TOML: Invalid value (at the end of the file)"),
    ("[[tests]]\nname = 'a'\ncommand = [1, 2]\n",
     "{path}:3:1: command of test 'a' must be a non-empty array of strings, e.g. command = [\"build/app\", \"--quick\"]"),
    ("[[tests]]\nname = 'a'\ncommand = ['a']\nx = " + "[" * 3000 + "]" * 3000 + "\n",
     "{path}:4: arrays or inline tables nested more than 100 deep (a budget file never needs that many)"),
    (b"[defaults]\npeak = '\xff'\n", "{path}:2: not UTF-8 text (TOML files are UTF-8)"),
])
def test_a_bad_budget_file_is_one_error_line(tmp_path, capsys, good, text, what):
    path = tmp_path / "heap-budget.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    status, out, err = heaptype(capsys, "check", good, "--budget", path)
    assert (status, out, err) == (2, "", f"heaptype: error: {what.format(path=path)}\n")


def test_a_budget_file_that_is_a_directory_is_one_error_line(tmp_path, capsys, good):
    status, out, err = heaptype(capsys, "check", good, "--budget", tmp_path)
    assert (status, out) == (2, "")
    assert err == f"heaptype: error: {tmp_path}: cannot read the budget file: Is a directory\n"


@pytest.mark.parametrize("args, status", [(["dump", "/nonexistent-dir/snapshot.htp"], 3), (["no-such-mode"], 2)])
def test_run_keeps_the_programs_own_exit_status(tmp_path, capsys, cpp_programs, args, status):
    # tests/cpp/control.cpp exits 3 when heaptype::dump() cannot write, 2 for an unknown mode.
    output = tmp_path / "run.htp"
    code, _, err = heaptype(capsys, "run", "-o", output, "--", cpp_programs.program("control"), *args)
    assert code == status and output.stat().st_size > 64
    assert err.splitlines()[0] == f"heaptype: profile written to {output}"
