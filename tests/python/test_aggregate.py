"""The aggregated mode (issue 23): counts per call site in place of events.

HEAPTYPE_MODE=aggregate (``heaptype run --aggregate``) keeps, per (thread, site),
allocations, temporaries, blocks live and blocks live at the heap's peak, and per type
its own peak (src/runtime/aggregate.hpp). Each program here runs twice, the same work
each time: once recording every event, once aggregated. Everything the aggregated
profile claims to know must equal what the full profile says: per type and per call
path allocations, objects, bytes, temporaries and leaks, the heap's peak, a typed row's
own peak, what each type had live at the peak; the rest must say it is not there.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import heaptype
from conftest import profile_chunks as chunks, run_profiled
from heaptype.analyze.profile import ProfileError

ROUNDS = "200000"  # steady_loop: ~0.4 M allocations, peak in the middle


def record(cpp_programs, tmp_path, name: str, *args: str) -> tuple:
    """The full and the aggregated profile of one program's run (same arguments)."""
    program = cpp_programs.program(name)
    profiles = []
    for mode in ("full", "aggregate"):
        output = tmp_path / f"{name}.{mode}.htp"
        done = run_profiled(program, output, *args, env={"HEAPTYPE_MODE": mode}, timeout=300)
        assert done.returncode == 0, done.stderr
        profiles.append(heaptype.load(output))
    full, aggregated = profiles
    assert not full.aggregated and aggregated.aggregated
    assert aggregated.complete and aggregated.warnings == []
    return full, aggregated


COUNTS = ("allocations", "objects", "bytes", "live_bytes", "live_blocks")


def by_label(profile, fields) -> dict:
    return {g.label: tuple(getattr(g, f) for f in fields) for g in profile.by_type()}


def assert_same_counts(full, aggregated, fields) -> None:
    assert by_label(aggregated, fields) == by_label(full, fields)
    for f in fields:
        assert getattr(aggregated.totals, f) == getattr(full.totals, f), f


@pytest.mark.parametrize("name,args", [("steady_loop", (ROUNDS,)), ("temporaries", ())],
                         ids=["steady_loop", "temporaries"])
def test_one_thread_counts_peaks_and_leaks_equal_the_full_profile(cpp_programs, tmp_path, name, args):
    full, aggregated = record(cpp_programs, tmp_path, name, *args)
    assert_same_counts(full, aggregated, COUNTS + ("temporary_allocations",))
    assert aggregated.totals.peak_bytes == full.totals.peak_bytes
    # A typed row keeps its own peak; any other row says it shows the heap's peak's share.
    own = {g.label: g.peak_bytes for g in aggregated.by_type() if not g.peak_at_heap_peak}
    assert own and own == {label: g.peak_bytes for label, g in
                           ((g.label, g) for g in full.by_type()) if label in own}
    assert {g.label for g in aggregated.by_type() if g.type is not None and not g.inferred} <= set(own)
    # What was live at the peak, type by type.
    at_peak = [{g.label: g.live_bytes for g in p.at("peak").by_type() if g.live_bytes} for p in (full, aggregated)]
    assert at_peak[1] == at_peak[0]
    assert sum(at_peak[1].values()) == full.totals.peak_bytes
    # Call paths: the same rows.
    paths = [{(row.path, row.type): (row.allocations, row.bytes) for row in p.call_paths()}
             for p in (full, aggregated)]
    assert paths[1] == paths[0]
    # The leaks: the same blocks by type and call stack.
    assert aggregated.totals.live_blocks == full.totals.live_blocks


def test_steady_loop_figures_are_the_programs(cpp_programs, tmp_path):
    _, aggregated = record(cpp_programs, tmp_path, "steady_loop", ROUNDS)
    rows = {g.label: g for g in aggregated.by_type()}
    rounds = int(ROUNDS)
    assert rows["Request"].allocations == rows["Reply"].allocations == rounds // 2
    assert rows["Buffer"].allocations == rows["Buffer"].temporary_allocations == rounds
    assert rows["Reply"].live_blocks == rounds // 2 // 1000  # one per 1,000 shrinking rounds leaked
    assert rows["Request"].peak_bytes == rounds // 2 * 56 and rows["Reply"].peak_bytes == rounds // 2 * 32
    assert rows["Buffer"].peak_bytes == 200
    # Bounded by sites: the whole profile is a few KiB for 0.4 M allocations.
    assert aggregated.file_bytes < 16 << 10


def test_threads_counts_equal_the_full_profile(cpp_programs, tmp_path):
    # Temporaries need one order of every thread's events: the full profile merges the
    # threads' streams by clock ticks, the aggregated one counts in the true order.
    full, aggregated = record(cpp_programs, tmp_path, "threads", "4", "3000")
    assert_same_counts(full, aggregated, COUNTS)


def test_type_peaks_stay_exact_past_the_first_type_table(cpp_programs, tmp_path):
    """300 types, more than the first table of types holds (tests/cpp/many_types.cpp):
    blocks counted before it grows and freed after still take their bytes from their own
    type (a grown table once moved the types under the sites' feet: a type's peak came out
    doubled on fmt's format-test)."""
    full, aggregated = record(cpp_programs, tmp_path, "many_types", "300")
    assert_same_counts(full, aggregated, COUNTS)
    own_peaks = {g.label: g.peak_bytes for g in aggregated.by_type() if not g.peak_at_heap_peak}
    assert own_peaks == {g.label: g.peak_bytes for g in full.by_type() if g.label in own_peaks}
    assert (own_peaks["Early"], own_peaks["Late"], own_peaks["Kind<4>"]) == (3 * 24, 2 * 40, 2 * 40)
    assert sum(1 for label in own_peaks if label.startswith("Kind<")) == 300


def test_peak_under_cross_thread_frees_stays_within_the_bound(cpp_programs, tmp_path):
    bound, parcel, producers, per_producer = 48, 1000, 8, 5000  # tests/cpp/handoff.cpp
    program = cpp_programs.program("handoff")
    output = tmp_path / "handoff.htp"
    done = run_profiled(program, output, str(producers), "8", str(per_producer),
                        env={"HEAPTYPE_MODE": "aggregate"}, timeout=300)
    assert done.returncode == 0, done.stderr
    row = heaptype.load(output).type_row("Parcel")
    assert (row.allocations, row.live_bytes) == (producers * per_producer, 0)
    assert not row.peak_at_heap_peak and parcel <= row.peak_bytes <= bound * parcel


def test_views_that_replay_events_say_the_profile_is_aggregated(cpp_programs, tmp_path):
    _, aggregated = record(cpp_programs, tmp_path, "temporaries")
    for view in (lambda p: p.timeline(), lambda p: p.filter(time=(0, 1)), lambda p: p.at(0.5),
                 lambda p: p.heaptrack(lambda text: None), lambda p: p.memory_view()):
        with pytest.raises(ProfileError, match="aggregated profile"):
            view(aggregated)
    done = subprocess.run([sys.executable, "-m", "heaptype", "timeline", str(aggregated.path)],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "aggregated profile" in done.stderr and "--aggregate" in done.stderr
    for command in (["export", str(aggregated.path), "--format", "massif", "-o", str(tmp_path / "m.out")],
                    ["memory", str(aggregated.path)]):
        refused = subprocess.run([sys.executable, "-m", "heaptype", *command], capture_output=True, text=True)
        assert refused.returncode == 2 and "aggregated profile" in refused.stderr, command
    pprof = subprocess.run([sys.executable, "-m", "heaptype", "export", str(aggregated.path), "--format", "pprof",
                            "-o", str(tmp_path / "p.pb")], capture_output=True, text=True)
    assert pprof.returncode == 0 and (tmp_path / "p.pb").stat().st_size > 0, pprof.stderr
    report = subprocess.run([sys.executable, "-m", "heaptype", "report", str(aggregated.path)],
                            capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    assert "aggregated per call site" in report.stdout and "*" in report.stdout


def test_a_profile_cut_before_its_counts_keeps_its_definitions(cpp_programs, tmp_path):
    _, aggregated = record(cpp_programs, tmp_path, "temporaries")
    data = open(aggregated.path, "rb").read()
    # The counts are written at exit, just before the module map and the END chunk: cut
    # inside them and no whole set is left.
    for cut in range(len(data) - 1, 64, -1):
        cut_path = tmp_path / "cut.htp"
        cut_path.write_bytes(data[:cut])
        raw = heaptype.load(cut_path).raw
        if not raw.aggregate_complete:
            break
    profile = heaptype.load(cut_path)
    assert profile.aggregated and profile.totals.allocations == 0
    assert any("without a whole set of counts" in w for w in profile.warnings)


def test_heaptype_run_aggregate(cpp_programs, tmp_path):
    program = cpp_programs.program("steady_loop")
    output = tmp_path / "run.htp"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    done = subprocess.run([sys.executable, "-m", "heaptype", "run", "--aggregate", "-o", str(output), "--",
                           str(program), "1000"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    profile = heaptype.load(output)
    assert profile.aggregated and profile.type_row("Buffer").temporary_allocations == 1000
    watch = subprocess.run([sys.executable, "-m", "heaptype", "run", "--aggregate", "--watch", "--",
                            str(program), "10"], capture_output=True, text=True, env=env)
    assert watch.returncode != 0 and "--watch" in watch.stderr


@pytest.mark.parametrize("pause_ms,threads", [("0", 1), ("80", 2)], ids=["short-run", "past-50ms"])
def test_the_ticker_thread_starts_only_in_a_run_past_50_ms(cpp_programs, tmp_path, pause_ms, threads):
    """Aggregated (or with HEAPTYPE_TICKER_AFTER_MS=50), the runtime's ticker thread waits
    for the first operator new after 50 ms of the run: a test case's process of a few
    milliseconds never starts one. What starting it allocates (the thread's TLS) is the
    runtime's: every count is the same as with the full mode's ticker, started at once."""
    program = cpp_programs.program("ticker_wait")
    profiles, printed = {}, {}
    for mode, after in (("full", "50"), ("aggregate", ""), ("full", "")):  # "": each mode's default
        output = tmp_path / f"ticker.{mode}.{after}.htp"
        done = run_profiled(program, output, pause_ms, env={"HEAPTYPE_MODE": mode, "HEAPTYPE_TICKER_AFTER_MS": after})
        assert done.returncode == 0, done.stderr
        printed[mode, after] = done.stdout.strip()
        profiles[mode, after] = heaptype.load(output)
    assert printed == {("full", "50"): f"threads {threads}", ("aggregate", ""): f"threads {threads}",
                       ("full", ""): "threads 2"}
    full, aggregated, at_once = profiles["full", "50"], profiles["aggregate", ""], profiles["full", ""]
    assert_same_counts(full, aggregated, COUNTS + ("temporary_allocations",))
    assert_same_counts(at_once, full, COUNTS + ("temporary_allocations",))
    rows = {g.label: g.allocations for g in aggregated.by_type()}
    assert rows["Early"] == 100 and rows["Late"] == 50
    assert aggregated.totals.peak_bytes == full.totals.peak_bytes


@pytest.mark.parametrize("mode", ["full", "aggregate"])
def test_the_ticker_never_starts_from_a_free_glibc_makes_under_its_locks(cpp_programs, tmp_path, mode):
    """The first event past 50 ms is a free() glibc makes while it holds the lock of its
    cache of thread stacks (joining threads: tests/cpp/thread_churn.cpp). A ticker
    started there (pthread_create takes that lock) hung the process, its signals blocked;
    the ticker starts from the program's operator new only."""
    output = tmp_path / "churn.htp"
    done = run_profiled(cpp_programs.program("thread_churn"), output,
                        env={"HEAPTYPE_MODE": mode, "HEAPTYPE_TICKER_AFTER_MS": "50"}, timeout=60)
    assert (done.returncode, done.stdout) == (0, "items 8\n"), done.stderr
    item = heaptype.load(output).type_row("Item")
    assert (item.allocations, item.live_blocks) == (8, 0)


def run_control(cpp_programs, directory, mode: str, *args: str):
    directory.mkdir()
    output = directory / "control.htp"
    done = run_profiled(cpp_programs.program("control"), output, *args, env={"HEAPTYPE_MODE": mode})
    assert done.returncode == 0, done.stderr
    return done


def test_dump_and_fork_write_the_counts_of_their_moment_and_process(cpp_programs, tmp_path):
    """heaptype::dump() mid-run and a forked child (tests/cpp/control.cpp): each
    aggregated profile counts what the full profile of the same moment and process does."""
    for mode in ("full", "aggregate"):
        run_control(cpp_programs, tmp_path / f"dump-{mode}", mode, "dump", str(tmp_path / f"dump-{mode}" / "mid.htp"))
        run_control(cpp_programs, tmp_path / f"fork-{mode}", mode, "fork")
    for name in ("dump", "fork"):
        full = sorted((tmp_path / f"{name}-full").iterdir())
        aggregated = sorted((tmp_path / f"{name}-aggregate").iterdir())
        assert len(full) == len(aggregated) == 2
        for f, a in zip(full, aggregated):
            f_profile, a_profile = heaptype.load(f), heaptype.load(a)
            assert a_profile.aggregated and a_profile.complete and a_profile.warnings == []
            assert_same_counts(f_profile, a_profile, COUNTS)
            assert a_profile.totals.peak_bytes == f_profile.totals.peak_bytes


def test_counts_stay_exact_when_threads_start_after_a_dump_handed_the_counts_back(cpp_programs, tmp_path):
    """A written set of counts (dump(), the ticker's periodic set) only pauses the lock-free
    counts of the thread that owns them; the threads that start later end that for good,
    while the owner counts (tests/cpp/control.cpp dump_then_threads): the counts at exit
    are the full profile's."""
    profiles = {}
    for mode in ("full", "aggregate"):
        directory = tmp_path / mode
        run_control(cpp_programs, directory, mode, "dump_then_threads", str(directory / "mid.htp"))
        profiles[mode] = heaptype.load(directory / "control.htp")
    full, aggregated = profiles["full"], profiles["aggregate"]
    assert aggregated.aggregated and aggregated.complete and aggregated.warnings == []
    assert_same_counts(full, aggregated, COUNTS)
    rows = {g.label: g for g in aggregated.by_type()}
    assert (rows["Before"].allocations, rows["After"].allocations, rows["Kept"].live_blocks) == (2000, 80000, 20)


def test_heaptype_check_judges_what_the_counts_hold_and_names_what_they_do_not(cpp_programs, tmp_path):
    _, aggregated = record(cpp_programs, tmp_path, "steady_loop", ROUNDS)
    budget = tmp_path / "heap-budget.toml"
    check = [sys.executable, "-m", "heaptype", "check", str(aggregated.path), "--budget", str(budget)]
    head = '[[tests]]\nname = "loop"\ncommand = ["steady_loop"]\n'
    budget.write_text(head + '[tests.types."Request"]\npeak = "4 MiB"\nallocations = 100000\n')
    over = subprocess.run(check, capture_output=True, text=True)
    assert over.returncode == 1 and "Request" in over.stdout and "5,600,000 B" in over.stdout
    budget.write_text(head + '[tests.types."(untyped)"]\npeak = "1 MiB"\n')
    unjudged = subprocess.run(check, capture_output=True, text=True)
    assert unjudged.returncode == 2
    assert "aggregated profile" in unjudged.stderr and "(untyped)" in unjudged.stderr


def test_a_killed_run_keeps_the_counts_of_its_last_snapshot(cpp_programs, tmp_path):
    """SIGKILL leaves no exit to write counts at: the set of the last snapshot
    (HEAPTYPE_SIGNAL=USR2) stands, as the periodic sets (every 10 s) do."""
    import signal
    import time

    output = tmp_path / "killed.htp"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    env.update(HEAPTYPE_OUTPUT=str(output), HEAPTYPE_MODE="aggregate", HEAPTYPE_SIGNAL="USR2")
    process = subprocess.Popen([str(cpp_programs.program("steady_loop")), "200000", "1000000"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        process.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not heaptype.load(output).raw.aggregate_complete:
            time.sleep(0.1)
    finally:
        process.kill()
        process.wait()
    profile = heaptype.load(output)
    assert profile.aggregated and not profile.complete and profile.raw.aggregate_complete
    rows = {g.label: g for g in profile.by_type()}
    # Every Buffer is freed right after it is made: the snapshot may fall between the two.
    buffers = rows["Buffer"]
    assert buffers.allocations > 1000 and buffers.allocations - buffers.live_blocks == buffers.temporary_allocations
    assert buffers.live_blocks in (0, 1)
    assert rows["Request"].allocations >= int(ROUNDS) // 2


def test_a_damaged_set_of_counts_is_left_out_and_named(cpp_programs, tmp_path):
    _, aggregated = record(cpp_programs, tmp_path, "temporaries")
    data = bytearray(open(aggregated.path, "rb").read())
    tallies = [c for c in chunks(bytes(data)) if c[1] == 7]
    assert tallies, "no TALLIES chunk"
    payload = tallies[0][0]
    data[payload + 1] = 0x7F  # its site count: more sites than its bytes hold
    damaged = tmp_path / "damaged.htp"
    damaged.write_bytes(bytes(data))
    profile = heaptype.load(damaged)
    assert profile.aggregated and not profile.raw.aggregate_complete and profile.totals.allocations == 0
    assert any("TALLIES chunk of thread 1 counts more sites than it holds" in w for w in profile.warnings)
    assert any("without a whole set of counts" in w for w in profile.warnings)


def test_counts_that_do_not_follow_on_from_site_0_are_left_out(cpp_programs, tmp_path):
    """A thread's TALLIES chunks cover its sites in order: one starting elsewhere is damage
    (held densely, a chunk starting at site 20 million would take 640 MB)."""
    _, aggregated = record(cpp_programs, tmp_path, "temporaries")
    data = bytes(open(aggregated.path, "rb").read())
    payload = next(c for c in chunks(data) if c[1] == 7)[0]
    assert data[payload] == 0, "the first TALLIES chunk starts at site 0"
    damaged = tmp_path / "damaged.htp"
    damaged.write_bytes(data[:payload] + b"\x01" + data[payload + 1:])
    profile = heaptype.load(damaged)
    assert not profile.raw.aggregate_complete and profile.totals.allocations == 0
    assert any("TALLIES chunk of thread 1 starts at site 1, not where the thread's counts reached (0)" in w
               for w in profile.warnings)


def test_a_program_counting_on_one_thread_is_not_told_about_waiting(cpp_programs, tmp_path):
    """The note on threads that wait for the counts' lock (docs/aggregate.md) is for programs
    whose threads allocate at once: a program that counts on one thread never takes the
    lock (its thread owns the counts), whatever it allocates."""
    log = tmp_path / "runtime.log"
    output = tmp_path / "loop.htp"
    done = run_profiled(cpp_programs.program("steady_loop"), output, "200000",
                        env={"HEAPTYPE_MODE": "aggregate", "HEAPTYPE_LOG": str(log)})
    assert done.returncode == 0, done.stderr
    assert heaptype.load(output).totals.allocations > 100000
    assert "waited for another thread" not in (log.read_text() if log.exists() else "")
