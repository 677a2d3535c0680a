"""GoogleTest programs: telling one from another program, listing its cases, and the
cases of one shard. Shared by the CTest discovery of `pytest --heap-budget` and the
Bazel budget test, so it imports nothing of pytest (the Bazel test runs with the
package's own files only)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from .runner import exit_text

GTEST_MARKER = b"gtest_list_tests"
LIST_TIMEOUT = 120
# What makes a GoogleTest program run a part of its cases (Bazel's test-setup.sh exports
# them from TEST_SHARD_INDEX/TEST_TOTAL_SHARDS): a case run on its own must not inherit them.
GTEST_SHARDING_VARIABLES = ("GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS", "GTEST_SHARD_STATUS_FILE")


class ListError(Exception):
    pass


def is_gtest_program(path: str | os.PathLike) -> bool:
    """Whether the program holds GoogleTest's flag names (a GoogleTest main)."""
    try:
        return GTEST_MARKER in Path(path).read_bytes()
    except OSError:
        return False


def list_gtest_cases(command: list[str], cwd: Path | None, env: dict[str, str]) -> list[str]:
    """`Suite.Case` names from `--gtest_list_tests` (comments such as `# GetParam()`
    dropped; `DISABLED_` cases left out, as GoogleTest itself does). The listing run
    records nothing (HEAPTYPE_DISABLE=1) and ignores any sharding of the caller."""
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("HEAPTYPE_") and k not in GTEST_SHARDING_VARIABLES}
    environment.update(env, HEAPTYPE_DISABLE="1")
    try:
        done = subprocess.run(command + ["--gtest_list_tests"], cwd=cwd, env=environment, capture_output=True,
                              text=True, timeout=LIST_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ListError(f"listing the GoogleTest cases of {command[0]} failed: {e}") from None
    if done.returncode != 0:
        raise ListError(f"`{shlex.join(command)} --gtest_list_tests` failed ({exit_text(done.returncode)}): "
                        f"{done.stderr.strip()[-500:]}")
    return parse_gtest_list(done.stdout)


def parse_gtest_list(text: str) -> list[str]:
    cases, suite = [], None
    for line in text.splitlines():
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped.strip():
            continue
        if not line.startswith(" "):
            suite = stripped.strip()
            if not suite.endswith("."):
                suite = None  # a line gtest prints before the list
        elif suite is not None:
            case = stripped.strip()
            if not case.startswith("DISABLED_") and not suite.startswith("DISABLED_"):
                cases.append(suite + case)
    return cases


def shard_cases(cases: list[str], index: int, total: int) -> list[str]:
    """The cases shard `index` of `total` runs: GoogleTest's own rule (the n-th runnable
    case, in listing order, goes to shard n % total), so the shards' cases are disjoint
    and together are every case."""
    if not 0 <= index < total:
        raise ValueError(f"shard {index} of {total}")
    return [case for n, case in enumerate(cases) if n % total == index]
