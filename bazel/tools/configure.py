"""Describe the installed heaptype package to the Bazel repository rule (repositories.bzl).

Run by `heaptype_dependencies()` with the Python interpreter that has heaptype installed;
prints one JSON object on stdout:

  package_dir   the installed package (include/, lib/, flags.json, the Python modules)
  python        that interpreter (absolute), and python_version
  python_paths  {import name: path} of the package and of its installed dependencies
                (tomli before 3.11): the budget test and the aspect run
                with exactly these, declared as inputs, and nothing else on sys.path
  compile, callstack, link
                flags.json's token groups (link: the static runtime's) with the placeholders filled in for Bazel:
                paths relative to the execution root (--repo-root), the {exclude} list
                for the compiler Bazel uses (--cc), the callstack table for its family

The flag table itself is read from the package (flags.json, through heaptype.capture.flags):
Bazel, CMake and `heaptype --cflags` share that one list.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import sys
from pathlib import Path


def dependency_paths(package_dir: Path) -> dict[str, str]:
    """{top-level import name: file or directory} for heaptype and what it requires,
    directly or through another requirement (jinja2 needs markupsafe)."""
    paths = {"heaptype": str(package_dir)}
    try:
        pending = list(importlib.metadata.distribution("heaptype").requires or [])
    except importlib.metadata.PackageNotFoundError:  # run from a source tree: no metadata
        pending = ["jinja2", "tomli; python_version < '3.11'"]
    seen = set()
    while pending:
        requirement = pending.pop()
        if re.search(r";.*\bextra\s*==", requirement):
            continue  # an optional extra ([test]): not needed at run time
        name = re.split(r"[\s;<>=!~\[(]", requirement.strip(), maxsplit=1)[0]
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            if ";" in requirement:
                continue  # its marker does not apply to this Python (tomli on 3.11+)
            raise SystemExit(f"heaptype requires {name}, which is not installed for {sys.executable}")
        for top in top_level_names(dist):
            found = locate(dist, top)
            if found is not None:
                paths[top] = str(found)
        pending += dist.requires or []
    return paths


def top_level_names(dist: importlib.metadata.Distribution) -> list[str]:
    text = dist.read_text("top_level.txt")
    if text:
        return [line.strip() for line in text.splitlines() if line.strip()]
    names = set()
    for file in dist.files or []:
        first = file.parts[0]
        if first.endswith((".dist-info", ".egg-info", ".data")) or first in ("..", "__pycache__"):
            continue
        names.add(first[:-3] if first.endswith(".py") and len(file.parts) == 1 else first)
    return sorted(names)


def locate(dist: importlib.metadata.Distribution, top: str) -> Path | None:
    for candidate in (Path(str(dist.locate_file(top))), Path(str(dist.locate_file(top + ".py")))):
        if candidate.exists():
            return candidate.resolve()
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cc", default="gcc", help="the C/C++ compiler Bazel's toolchain uses ($CC, else gcc)")
    parser.add_argument("--capture", default="auto",
                        help="type capture mode: auto (by compiler), macro or type-aware ($HEAPTYPE_CAPTURE)")
    parser.add_argument("--repo-root", required=True,
                        help="the generated repository's path from the execution root (external/<name>)")
    args = parser.parse_args()

    from heaptype import __version__
    from heaptype.capture import flags

    flags.check_installed()
    root = args.repo_root.rstrip("/")
    places = {"include": f"{root}/include", "stl_shim": f"{root}/include/heaptype-stl", "lib": f"{root}/lib"}
    # Code inlined from the compiler's own headers is not instrumented (the standard
    # library), nor HeapType's headers: the same list `heaptype --cflags` builds.
    exclude = ",".join([*flags.system_include_dirs(args.cc), places["include"]])
    table = json.loads((flags.PACKAGE_DIR / "flags.json").read_text())
    family = flags.compiler_family(args.cc)

    def expand(options):
        return [[token.format(exclude=exclude, **places) for token in option] for option in options]

    def split_link(options):
        """Link options that name a file of the package become declared library inputs
        (srcs of the runtime cc_library); the others stay linker options."""
        files, opts = [], []
        for option in options:
            if any("{lib}" in token for token in option):
                files += [token.format(lib="lib") for token in option if token.startswith("{lib}/")]
            else:
                opts += list(option)
        return {"files": files, "linkopts": opts}

    result = {
        "version": __version__,
        "package_dir": str(flags.PACKAGE_DIR),
        "bazel_dir": str(flags.bazel_dir()),
        "python": sys.executable,
        "python_version": "%d.%d" % sys.version_info[:2],
        "python_paths": dependency_paths(flags.PACKAGE_DIR),
        "compiler": args.cc,
        "compiler_family": family,
        "compile": {group: ({mode: expand(o) for mode, o in options.items()} if group == "capture" else expand(options))
                    for group, options in table["compile"].items()},
        "callstack": {mode: expand(by_family.get(family, [])) for mode, by_family in table["callstack"].items()},
        "default_callstack": table["default_callstack"],
        # How new-expressions report their types, for this compiler (flags.capture_mode).
        "capture": dict(zip(("mode", "reason"), flags.capture_mode(args.capture, args.cc))),
        # The static runtime; Bazel finds the shared one itself (cc_library srcs, rpath).
        "link": split_link(table["link"]["static"]),
    }
    json.dump(result, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
