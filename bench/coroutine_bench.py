#!/usr/bin/env python3
"""A server that works on coroutines under `heaptype run`: PowerDNS Recursor, beside heaptrack.

PowerDNS Recursor (Debian's, built without HeapType: the runtime is preloaded) runs each
query it must forward on an MTasker coroutine, a boost.context stack it mapped itself,
and makes most of its allocations there. A stack whose bounds the runtime does not know
is walked by frame rules alone (docs/modes.md, "Coroutines and fibers"). This benchmark
starts a local authoritative pdns_server for `fwd.test` (a wildcard zone) and the
recursor forwarding to it, sends the same dnsperf query file to each (half of the names
unique under the wildcard, a tenth that do not exist), checks the answers to a fixed set
of questions against the plain run's, stops the recursor by `rec_control quit-nicely`,
and reports, per tool, medians over interleaved rounds (the tools' order rotated):

  queries/s    dnsperf's "Queries per second" (ratio to plain); a lost query fails the run
  RSS          the recursor's resident memory after the load
  allocations  HeapType's profile and heaptrack's count (heaptrack_print): close, not equal
               (what the recursor does depends a little on timing: which of the
               concurrent questions for one name it forwards, which wait)

The load average is printed before and after.

Usage:  python bench/coroutine_bench.py [--rounds 3] [--queries 150000] [--json OUT]
Needs: apt-get install pdns-recursor pdns-server pdns-backend-bind dnsperf bind9-dnsutils (heaptrack optional)
"""

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import BenchError  # noqa: E402

AUTH_PORT, REC_PORT = 5300, 5353
ZONE = """$ORIGIN fwd.test.
$TTL 3600
@       IN SOA ns1.fwd.test. host.fwd.test. 1 3600 600 86400 3600
@       IN NS ns1.fwd.test.
ns1     IN A 127.0.0.1
www     IN A 192.0.2.10
www     IN AAAA 2001:db8::10
mail    IN MX 10 mx.fwd.test.
mx      IN A 192.0.2.25
alias   IN CNAME www.fwd.test.
txt     IN TXT "hello world" "second string"
*.w     IN A 192.0.2.99
*.w     IN TXT "wildcard answer"
""" + "".join(f"h{i} IN A 192.0.2.{i}\n" for i in range(1, 51))
AUTH_CONF = """launch=bind
bind-config={d}/named.conf
local-address=127.0.0.1
local-port={port}
socket-dir={d}/auth
daemon=no
guardian=no
disable-syslog=yes
loglevel=3
webserver=no
api=no
setuid=
setgid=
"""
RECURSOR_CONF = """local-address=127.0.0.1
local-port={port}
socket-dir={d}/rec
daemon=no
disable-syslog=yes
loglevel=3
quiet=yes
threads=2
forward-zones=fwd.test=127.0.0.1:{auth}
dnssec=off
hint-file=/usr/share/dns/root.hints
security-poll-suffix=
lua-config-file=
include-dir=
"""
QUESTIONS = ["www.fwd.test A", "www.fwd.test AAAA", "mail.fwd.test MX", "alias.fwd.test A", "txt.fwd.test TXT",
             "abc.w.fwd.test A", "abc.w.fwd.test TXT", "nonexist.fwd.test A", "fwd.test SOA", "h7.fwd.test A"]


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def prepare(work: str, queries: int) -> None:
    for sub in ("auth", "rec"):
        os.makedirs(os.path.join(work, sub))
    files = {"fwd.test.zone": ZONE,
             "named.conf": f'zone "fwd.test" {{ type master; file "{work}/fwd.test.zone"; }};\n',
             "auth/pdns.conf": AUTH_CONF.format(d=work, port=AUTH_PORT),
             "rec/recursor.conf": RECURSOR_CONF.format(d=work, port=REC_PORT, auth=AUTH_PORT)}
    for name, text in files.items():
        with open(os.path.join(work, name), "w") as f:
            f.write(text)
    pick = random.Random(22)
    with open(os.path.join(work, "queries.txt"), "w") as f:
        for i in range(queries):
            roll = pick.random()
            if roll < 0.5:
                f.write(f"q{i}-{pick.randrange(10**6)}.w.fwd.test {'A' if i % 2 else 'TXT'}\n")
            elif roll < 0.6:
                f.write(f"missing{pick.randrange(1000)}.fwd.test A\n")
            else:
                f.write(f"h{pick.randrange(1, 51)}.fwd.test A\n")


def dig(question: str, tcp: bool = False) -> str:
    name, qtype = question.split()
    done = subprocess.run(["dig", "@127.0.0.1", "-p", str(REC_PORT), "+tries=1", "+time=3", "+short",
                           *(["+tcp"] if tcp else []), name, qtype], capture_output=True, text=True, timeout=30)
    return "\n".join(sorted(done.stdout.split("\n")))


def answers() -> dict:
    return {q: (dig(q), dig(q, tcp=True)) for q in QUESTIONS}


def wait_for_answer(deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if "192.0.2.10" in dig("www.fwd.test A"):
            return
        time.sleep(0.1)
    raise BenchError(f"the recursor did not answer on port {REC_PORT} within {deadline_s:.0f} s")


def one_run(tool: str, work: str, opts) -> dict:
    out = os.path.join(work, f"run-{tool}")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    recursor = ["pdns_recursor", f"--config-dir={work}/rec"]
    command = {"plain": recursor,
               "heaptype": [sys.executable, "-m", "heaptype", "run", "-o", f"{out}/rec.htp", "--", *recursor],
               "heaptrack": ["heaptrack", "-o", f"{out}/rec", *recursor]}[tool]
    started = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_answer()
        before = answers()
        perf = subprocess.run(["dnsperf", "-s", "127.0.0.1", "-p", str(REC_PORT), "-d", f"{work}/queries.txt", "-n", "1",
                               "-c", "4", "-t", "5"], capture_output=True, text=True, timeout=1800).stdout
        lost = int(re.search(r"Queries lost:\s+(\d+)", perf).group(1))
        if lost:
            raise BenchError(f"{tool}: {lost} queries lost")
        rate = float(re.search(r"Queries per second:\s+([\d.]+)", perf).group(1))
        pid = int(subprocess.run(["pgrep", "-f", f"^pdns_recursor --config-dir={work}/rec"], capture_output=True,
                                 text=True).stdout.split()[0])
        with open(f"/proc/{pid}/status") as f:
            rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
        subprocess.run(["rec_control", f"--socket-dir={work}/rec", "quit-nicely"], capture_output=True, timeout=60)
        _, stderr = started.communicate(timeout=120)
    finally:
        if started.poll() is None:
            started.kill()
            subprocess.run(["pkill", "-f", f"pdns_recursor --config-dir={work}/rec"], check=False)
    if started.returncode != 0:
        raise BenchError(f"{tool}: exit status {started.returncode}\n{stderr[-2000:]}")
    result = {"rate": rate, "rss_kib": rss, "answers": before}
    if tool == "heaptype":
        import heaptype
        result["allocations"] = heaptype.load(f"{out}/rec.htp").totals.allocations
    elif tool == "heaptrack":
        data = next(name for name in os.listdir(out) if name.startswith("rec"))
        printed = subprocess.run(["heaptrack_print", "-f", os.path.join(out, data), "-s", "0", "-a", "0", "-T", "0",
                                  "-l", "0", "-p", "0"], capture_output=True, text=True, timeout=1800).stdout
        result["allocations"] = int(re.search(r"calls to allocation functions: (\d+)", printed).group(1))
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=150000)
    ap.add_argument("--json", help="write the rounds here")
    opts = ap.parse_args()
    missing = [t for t in ("pdns_recursor", "pdns_server", "rec_control", "dnsperf", "dig") if not shutil.which(t)]
    if missing:
        raise BenchError(f"{', '.join(missing)} not found: apt-get install pdns-recursor pdns-server "
                         "pdns-backend-bind dnsperf bind9-dnsutils")
    tools = ["plain", "heaptype"] + (["heaptrack"] if shutil.which("heaptrack") else [])
    work = tempfile.mkdtemp(prefix="heaptype-coroutine-bench-")
    prepare(work, opts.queries)
    auth = subprocess.Popen(["pdns_server", f"--config-dir={work}/auth"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    rounds = {tool: [] for tool in tools}
    before = load_average()
    try:
        for r in range(opts.rounds):
            for tool in tools[r % len(tools):] + tools[:r % len(tools)]:
                rounds[tool].append(one_run(tool, work, opts))
                print(f"round {r + 1}/{opts.rounds} {tool}: {rounds[tool][-1]['rate']:,.0f} queries/s", file=sys.stderr)
    finally:
        auth.terminate()
        auth.wait(timeout=30)
    after = load_average()
    reference = rounds["plain"][0]["answers"]
    for tool, runs in rounds.items():
        for run in runs:
            if run.pop("answers") != reference:
                raise BenchError(f"{tool}: the answers differ from the plain run's")
    version = subprocess.run(["pdns_recursor", "--version"], capture_output=True, text=True)
    version = re.search(r"PowerDNS Recursor (\S+)", version.stdout + version.stderr)
    base = statistics.median(run["rate"] for run in rounds["plain"])
    print(f"PowerDNS Recursor {version.group(1) if version else '?'}, 2 threads, forwarding to pdns_server; "
          f"dnsperf -c 4, {opts.queries:,} queries; {opts.rounds} interleaved rounds, medians; load average "
          f"{before} before, {after} after; answers identical in every run")
    print(f"{'':10} {'queries/s (time x plain)':>26}  {'RSS':>9}  {'allocations':>12}")
    for tool, runs in rounds.items():
        rate = statistics.median(run["rate"] for run in runs)
        rss = statistics.median(run["rss_kib"] for run in runs)
        allocations = f"{statistics.median(run['allocations'] for run in runs):>12,.0f}" if tool != "plain" else ""
        print(f"{tool:10} {rate:>17,.0f} ({base / rate:.2f}x)  {rss / 1024:>5.0f} MiB  {allocations}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"load_before": before, "load_after": after, "rounds": rounds}, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"coroutine_bench: {e}", file=sys.stderr)
        sys.exit(2)
