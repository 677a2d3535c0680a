#!/usr/bin/env python3
"""A server under `heaptype run`: nginx, its master and forked workers, under load.

real_programs.py runs programs to their end; a server runs until it is told to stop, and
does its work in processes its master forks (and forks again on a reload). This one
starts nginx (Debian's, built without HeapType: the runtime is preloaded) in the
foreground with two workers, serves a small response and a 20 KiB file to ApacheBench
(`ab`), reloads it with SIGHUP half-way, and stops it with SIGTERM sent to the process it
started (`heaptype run`, which passes it on). Each round runs nginx plain and under
`heaptype run`, in alternating order; the figures are medians over the rounds of:

  requests/s   ab's "Requests per second" on each URL (ratios to plain)
  worker RSS   the workers' resident memory after the load (ps), summed
  profiles     how many profiles the run wrote (the master's and each worker's) and their
               allocations, checked against the requests served (each request allocates)

and every response is checked (ab's failed and non-2xx counts must be 0). The load
average is printed before and after: figures taken on a busy machine are not figures.

Usage:  python bench/server_bench.py [--rounds 5] [--requests 20000] [--concurrency 8] [--json OUT]
Needs nginx and ab (apt-get install nginx apache2-utils); run as root or a user nginx runs as.
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import BenchError  # noqa: E402

PORT = 8089
CONFIG = """daemon off;
master_process on;
worker_processes 2;
pid {d}/nginx.pid;
error_log {d}/error.log notice;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {d}/temp/client;
    proxy_temp_path {d}/temp/proxy;
    fastcgi_temp_path {d}/temp/fastcgi;
    uwsgi_temp_path {d}/temp/uwsgi;
    scgi_temp_path {d}/temp/scgi;
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port};
        root {d}/html;
        location = /ok {{ return 200 "ok\\n"; }}
    }}
}}
"""
URLS = {"small response": "/ok", "20 KiB file": "/file.bin"}


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def prepare(work: str) -> str:
    os.makedirs(os.path.join(work, "html"))
    os.makedirs(os.path.join(work, "temp"))
    with open(os.path.join(work, "html", "file.bin"), "wb") as f:
        f.write(os.urandom(20 * 1024))
    os.chmod(work, 0o755)
    for root, dirs, files in os.walk(work):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755)
    config = os.path.join(work, "nginx.conf")
    with open(config, "w") as f:
        f.write(CONFIG.format(d=work, port=PORT))
    return config


def wait_until_serving(deadline_s: float = 10.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/ok", timeout=1) as reply:
                if reply.read() == b"ok\n":
                    return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"nginx did not answer on port {PORT} within {deadline_s:.0f} s")


def ab(url: str, requests: int, concurrency: int) -> float:
    done = subprocess.run(["ab", "-q", "-n", str(requests), "-c", str(concurrency), f"http://127.0.0.1:{PORT}{url}"],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise BenchError(f"ab failed on {url}:\n{done.stderr[-2000:]}")
    failed = int(re.search(r"Failed requests:\s+(\d+)", done.stdout).group(1))
    non_2xx = re.search(r"Non-2xx responses:\s+(\d+)", done.stdout)
    if failed or non_2xx:
        raise BenchError(f"{url}: {failed} failed requests, {non_2xx.group(1) if non_2xx else 0} not 2xx")
    return float(re.search(r"Requests per second:\s+([\d.]+)", done.stdout).group(1))


def workers_rss_kib(master: int) -> int:
    out = subprocess.run(["ps", "--ppid", str(master), "-o", "rss="], capture_output=True, text=True).stdout
    return sum(int(x) for x in out.split())


def one_run(tool: str, config: str, work: str, opts) -> dict:
    """nginx started plain or under heaptype run; load, reload, load, SIGTERM."""
    profiles = os.path.join(work, f"profiles-{tool}")
    shutil.rmtree(profiles, ignore_errors=True)
    os.makedirs(profiles)
    nginx = ["nginx", "-p", work, "-c", config]
    command = nginx if tool == "plain" else [
        sys.executable, "-m", "heaptype", "run", "-o", os.path.join(profiles, "nginx.%p.htp"), "--", *nginx]
    started = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_serving()
        with open(os.path.join(work, "nginx.pid")) as f:
            master = int(f.read())
        rates = {name: [ab(url, opts.requests, opts.concurrency)] for name, url in URLS.items()}
        os.kill(master, signal.SIGHUP)  # a reload: the master forks new workers
        time.sleep(1.0)
        wait_until_serving()
        for name, url in URLS.items():
            rates[name].append(ab(url, opts.requests, opts.concurrency))
        rss = workers_rss_kib(master)
        started.send_signal(signal.SIGTERM)  # to the process started: heaptype run passes it on
        _, stderr = started.communicate(timeout=60)
    finally:
        if started.poll() is None:
            started.kill()
            subprocess.run(["pkill", "-f", f"nginx -p {work}"], check=False)
    if started.returncode != 0:
        raise BenchError(f"{tool}: exit status {started.returncode}\n{stderr[-2000:]}")
    result = {"rates": {name: statistics.mean(r) for name, r in rates.items()}, "worker_rss_kib": rss}
    if tool != "plain":
        import heaptype
        loaded = [heaptype.load(os.path.join(profiles, name)) for name in sorted(os.listdir(profiles))]
        result["profiles"] = len(loaded)
        result["complete"] = sum(p.complete for p in loaded)
        result["allocations"] = sum(p.totals.allocations for p in loaded)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=20000, help="per URL and load (two loads a run)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--json", help="write the rounds here")
    opts = ap.parse_args()
    missing = [tool for tool in ("nginx", "ab") if not shutil.which(tool)]
    if missing:
        raise BenchError(f"{', '.join(missing)} not found: apt-get install nginx apache2-utils")
    work = tempfile.mkdtemp(prefix="heaptype-server-bench-")
    os.chmod(work, 0o755)
    config = prepare(work)
    before = load_average()
    rounds = {"plain": [], "heaptype": []}
    for r in range(opts.rounds):
        for tool in (("plain", "heaptype") if r % 2 == 0 else ("heaptype", "plain")):
            rounds[tool].append(one_run(tool, config, work, opts))
            print(f"round {r + 1}/{opts.rounds} {tool}: "
                  + ", ".join(f"{name} {rate:,.0f}/s" for name, rate in rounds[tool][-1]["rates"].items()),
                  file=sys.stderr)
    after = load_average()
    version = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
    print(f"{version.replace('nginx version: ', '')}, 2 workers, "
          f"ab -n {opts.requests} -c {opts.concurrency} per URL, twice (a reload between), "
          f"{opts.rounds} interleaved rounds, medians; load average {before} before, {after} after")
    print(f"{'':12} " + "  ".join(f"{name:>22}" for name in URLS) + f"  {'worker RSS':>11}")
    for tool, runs in rounds.items():
        cells = []
        for name in URLS:
            rate = statistics.median(run["rates"][name] for run in runs)
            base = statistics.median(run["rates"][name] for run in rounds["plain"])
            cells.append(f"{rate:>10,.0f}/s ({rate / base:.2f}x)")
        rss = statistics.median(run["worker_rss_kib"] for run in runs)
        print(f"{tool:12} " + "  ".join(f"{c:>22}" for c in cells) + f"  {rss / 1024:>7.1f} MiB")
    profiled = rounds["heaptype"]
    served = 2 * 2 * opts.requests  # two URLs, two loads
    print(f"heaptype profiles a run: {statistics.median(r['profiles'] for r in profiled):.0f} "
          f"(complete: {min(r['complete'] for r in profiled)} to {max(r['complete'] for r in profiled)}), "
          f"allocations {statistics.median(r['allocations'] for r in profiled):,.0f} "
          f"({statistics.median(r['allocations'] for r in profiled) / served:.1f} per request served)")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"load_before": before, "load_after": after, "rounds": rounds}, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"server_bench: {e}", file=sys.stderr)
        sys.exit(2)
