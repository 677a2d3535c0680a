"""HeapType for Bazel: profiled C++ targets, type tables, heap budget tests.

    load("@heaptype//:defs.bzl", "heaptype_cc_binary", "heaptype_budget_test")

    heaptype_cc_binary(name = "app", srcs = ["app.cc"], deps = [":lib"])
    heaptype_budget_test(name = "app_heap", binary = ":app", args = ["--small"], budget = "heap-budget.toml")

* `heaptype_cc_binary`, `heaptype_cc_test`, `heaptype_cc_library`: the native rules with
  HeapType's compile flags (the force-included heaptype/new.hpp, the typed libstdc++
  allocator, call stacks) and, for binaries and tests, the runtime. The flags are the
  installed package's flags.json, the list `heaptype --cflags` prints and the CMake
  package uses (@heaptype_install//:flags.bzl is generated from it).
* `heaptype_aspect`: `bazel build //... --aspects=@heaptype//:defs.bzl%heaptype_aspect
  --output_groups=heaptype_types` writes, for every cc_binary and cc_test reached, the
  type table of the linked binary (`<name>.heaptype_types.json`: tag address -> C++ type)
  read from its ELF symbols by the package's own symbolizer (heaptype.analyze.symbols).
* `heaptype_budget_test`: `bazel test` runs a binary under profiling and checks the
  profile against a TOML budget file with the package's budget engine (`heaptype
  check`); the profile and the reports go to the test's undeclared outputs.

To profile a whole build without editing BUILD files, see heaptype.bazelrc
(`--config=heaptype`).
"""

load("@heaptype_install//:flags.bzl", "CALLSTACK", "CAPTURE", "COMPILE", "DEFAULT_CALLSTACK")

CALLSTACK_MODES = ["frame-pointer", "instrument", "none"]
CAPTURE_MODES = ["auto", "macro", "type-aware"]

_RUNTIME = Label("//:runtime")
_HEADERS = Label("//:headers")

# --- flags and macros ---------------------------------------------------------------------

def heaptype_copts(types = True, stl_types = True, debug = True, callstack = DEFAULT_CALLSTACK, capture = "auto"):
    """The compile options of a profiled target, from the package's flags.json.

    Args:
      types: type every new-expression (force-included heaptype/new.hpp).
      stl_types: type std::allocator allocations (the libstdc++ shim ahead of libstdc++).
      debug: debug information (-g), for call sites in reports.
      callstack: how allocations get their calling context: "frame-pointer" (the
        default: the stack walked at each allocation, -fno-omit-frame-pointer),
        "instrument" (-finstrument-functions, system headers excluded) or "none".
      capture: how new-expressions report their types: "auto" (the mode chosen for the
        toolchain's compiler when @heaptype_install was configured: type-aware for Clang
        21 or later, else the macro; $HEAPTYPE_CAPTURE forces it there), "macro" or
        "type-aware" (docs/capture.md).
    Returns:
      A list of options; the headers they name come with @heaptype//:headers.
    """
    if callstack not in CALLSTACK_MODES:
        fail("heaptype: callstack = %r: use one of %s" % (callstack, ", ".join(CALLSTACK_MODES)))
    if capture not in CAPTURE_MODES:
        fail("heaptype: capture = %r: use one of %s" % (capture, ", ".join(CAPTURE_MODES)))
    groups = ["headers"]
    if types:
        groups.append("types")
    if stl_types:
        groups.append("stl_types")
    if debug:
        groups.append("debug")
    options = []
    for group in groups:
        for option in COMPILE[group]:
            options.extend(option)
    if types:
        for option in COMPILE["capture"][CAPTURE if capture == "auto" else capture]:
            options.extend(option)
    for option in CALLSTACK[callstack]:
        options.extend(option)
    return options

def _instrumented(kwargs, deps, types, stl_types, debug, callstack):
    """kwargs with HeapType's copts first (the target's own can override them)."""
    kwargs = dict(kwargs)
    kwargs["copts"] = heaptype_copts(types, stl_types, debug, callstack) + kwargs.get("copts", [])
    kwargs["deps"] = kwargs.get("deps", []) + deps
    return kwargs

def heaptype_cc_binary(name, types = True, stl_types = True, debug = True, callstack = DEFAULT_CALLSTACK, **kwargs):
    """A cc_binary compiled with HeapType's flags and linked with its runtime.

    The binary writes a profile when it runs (HEAPTYPE_OUTPUT names the file, default
    heaptype.<program>.<pid>.htp; HEAPTYPE_DISABLE=1 turns it off). Libraries it
    depends on are typed too when they are heaptype_cc_library targets.
    """
    native.cc_binary(name = name, **_instrumented(kwargs, [_RUNTIME], types, stl_types, debug, callstack))

def heaptype_cc_test(name, types = True, stl_types = True, debug = True, callstack = DEFAULT_CALLSTACK, **kwargs):
    """A cc_test compiled with HeapType's flags and linked with its runtime.

    Without HEAPTYPE_OUTPUT the runtime writes the test's profile to
    $TEST_UNDECLARED_OUTPUTS_DIR, so Bazel keeps it in the test's outputs
    (bazel-testlogs/.../test.outputs). To check a heap budget, give the program to
    heaptype_budget_test.
    """
    native.cc_test(name = name, **_instrumented(kwargs, [_RUNTIME], types, stl_types, debug, callstack))

def heaptype_cc_library(name, types = True, stl_types = True, debug = True, callstack = DEFAULT_CALLSTACK, **kwargs):
    """A cc_library compiled with HeapType's flags (the binary that links it brings the
    runtime), like `heaptype_instrument(<library>)` in CMake."""
    native.cc_library(name = name, **_instrumented(kwargs, [_HEADERS], types, stl_types, debug, callstack))

# --- the Python side: interpreter and package ------------------------------------------------

def _python_command(py_runtime):
    """(interpreter as File or path string, the files it needs) of a PyRuntimeInfo: an
    in-build runtime (hermetic) or a path on the machine (interpreter_path)."""
    if py_runtime.interpreter != None:
        return py_runtime.interpreter, depset([py_runtime.interpreter], transitive = [py_runtime.files])
    return py_runtime.interpreter_path, depset()

def _python_root(files):
    """python/heaptype/__init__.py among the python_package files: its grandparent is
    the directory to put on PYTHONPATH."""
    for f in files:
        if f.short_path.endswith("/python/heaptype/__init__.py"):
            return f
    fail("heaptype: the python_package files hold no python/heaptype/__init__.py: is @heaptype_install complete?")

_PYTHON_ATTRS = {
    "_python": attr.label(
        default = Label("//:python"),
        providers = [PyRuntimeInfo],
    ),
    "_python_package": attr.label(
        default = Label("//:python_package"),
        allow_files = True,
    ),
}

# --- the aspect: type tables ----------------------------------------------------------------

HeapTypeTypesInfo = provider(
    doc = "Type tables of the cc_binary and cc_test targets at or below a target.",
    fields = {"tables": "depset of <name>.heaptype_types.json files"},
)

_BINARY_RULES = ("cc_binary", "cc_test")
_PROPAGATE = ["deps", "data", "binary", "srcs"]

def _type_table(target, ctx):
    binary = target[DefaultInfo].files_to_run.executable
    if binary == None:
        return None
    table = ctx.actions.declare_file(ctx.label.name + ".heaptype_types.json")
    python, python_files = _python_command(ctx.attr._python[PyRuntimeInfo])
    package_files = ctx.attr._python_package.files
    init = _python_root(package_files.to_list())
    python_path = init.dirname.rsplit("/", 1)[0]
    ctx.actions.run(
        executable = python,
        arguments = ["-S", ctx.file._type_table_tool.path, binary.path, table.path, str(target.label)],
        inputs = depset([binary, ctx.file._type_table_tool], transitive = [package_files, python_files]),
        outputs = [table],
        env = {"PYTHONPATH": python_path, "PYTHONDONTWRITEBYTECODE": "1"},
        mnemonic = "HeapTypeTypes",
        progress_message = "Reading the HeapType type table of %s" % target.label,
    )
    return table

def _heaptype_aspect_impl(target, ctx):
    own = []
    if ctx.rule.kind in _BINARY_RULES:
        table = _type_table(target, ctx)
        if table != None:
            own.append(table)
    transitive = []
    for name in _PROPAGATE:
        value = getattr(ctx.rule.attr, name, None)
        if value == None:
            continue
        for dep in (value if type(value) == "list" else [value]):
            if type(dep) == "Target" and HeapTypeTypesInfo in dep:
                transitive.append(dep[HeapTypeTypesInfo].tables)
    tables = depset(own, transitive = transitive)
    return [HeapTypeTypesInfo(tables = tables), OutputGroupInfo(heaptype_types = tables)]

heaptype_aspect = aspect(
    implementation = _heaptype_aspect_impl,
    doc = """Type tables of linked binaries: for every cc_binary and cc_test reached (the
command line's targets and what they reach through deps, data, srcs and binary), the
file <name>.heaptype_types.json in output group `heaptype_types`:

    {"binary": "//pkg:app", "types": [{"tag": "0x4041", "type": "Token"}, ...]}

`tag` is the link-time address of the type's tag symbol (heaptype::type_id<T>::tag),
the address a profile records after the load bias is taken off.""",
    attr_aspects = _PROPAGATE,
    attrs = dict(_PYTHON_ATTRS, _type_table_tool = attr.label(
        default = Label("//tools:type_table.py"),
        allow_single_file = True,
    )),
)

# --- the budget test ------------------------------------------------------------------------

def _runfiles_path(ctx, f):
    """A file's path below the runfiles root: <workspace>/pkg/f or <repo>/pkg/f."""
    if f.short_path.startswith("../"):
        return f.short_path[3:]
    return ctx.workspace_name + "/" + f.short_path

def _shell_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"

_LAUNCHER = """#!/usr/bin/env bash
# {label}: runs {binary_label} under HeapType and checks its heap budget
# ({budget}). Generated by heaptype_budget_test (@heaptype//:defs.bzl).
set -euo pipefail
if [[ -d "$0.runfiles" ]]; then runfiles="$0.runfiles"         # bazel run, bazel-bin/...
elif [[ -n "${{TEST_SRCDIR:-}}" ]]; then runfiles="$TEST_SRCDIR"  # bazel test
elif [[ -n "${{RUNFILES_DIR:-}}" ]]; then runfiles="$RUNFILES_DIR"
else echo "{label}: cannot find the runfiles directory" >&2; exit 2
fi
runfiles="$(cd "$runfiles" && pwd)"
export PYTHONPATH="$runfiles/{python_path}"
export PYTHONDONTWRITEBYTECODE=1
exec {python} -S "$runfiles/{runner}" --runfiles "$runfiles" --label {label_q} \\
  --binary {binary} --budget {budget_q} {test_name} {gtest_split} -- {args} "$@"
"""

def _budget_test_impl(ctx):
    python, python_files = _python_command(ctx.attr._python[PyRuntimeInfo])
    package_files = ctx.attr._python_package.files
    init = _python_root(package_files.to_list())
    if type(python) == "File":
        python_word = '"$runfiles/%s"' % _runfiles_path(ctx, python)
    else:
        python_word = _shell_quote(python)
    args = [_shell_quote(ctx.expand_location(a, ctx.attr.data + [ctx.attr.binary])) for a in ctx.attr.binary_args]
    launcher = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.write(launcher, is_executable = True, content = _LAUNCHER.format(
        label = str(ctx.label),
        label_q = _shell_quote(str(ctx.label)),
        binary_label = str(ctx.attr.binary.label),
        python = python_word,
        python_path = _runfiles_path(ctx, init).rsplit("/", 2)[0],
        runner = _runfiles_path(ctx, ctx.file._runner),
        binary = _shell_quote(_runfiles_path(ctx, ctx.executable.binary)),
        budget = _runfiles_path(ctx, ctx.file.budget),
        budget_q = _shell_quote(_runfiles_path(ctx, ctx.file.budget)),
        test_name = ("--test " + _shell_quote(ctx.attr.test_name)) if ctx.attr.test_name else "",
        gtest_split = "--gtest-split" if ctx.attr.gtest_split else "",
        args = " ".join(args),
    ))
    runfiles = ctx.runfiles(
        files = [ctx.file.budget, ctx.file._runner] + ctx.files.data,
        transitive_files = depset(transitive = [package_files, python_files]),
    )
    runfiles = runfiles.merge(ctx.attr.binary[DefaultInfo].default_runfiles)
    for d in ctx.attr.data:
        runfiles = runfiles.merge(d[DefaultInfo].default_runfiles)
    return [
        DefaultInfo(executable = launcher, runfiles = runfiles),
        testing.TestEnvironment(ctx.attr.env),
    ]

_heaptype_budget_test = rule(
    implementation = _budget_test_impl,
    test = True,
    attrs = dict(_PYTHON_ATTRS, **{
        "binary": attr.label(
            mandatory = True,
            executable = True,
            cfg = "target",
            doc = "The program to profile: built with HeapType (heaptype_cc_binary, --config=heaptype).",
        ),
        "binary_args": attr.string_list(doc = "Its arguments ($(location) expanded)."),
        "budget": attr.label(
            mandatory = True,
            allow_single_file = [".toml"],
            doc = "The budget file (the format `heaptype check` and `pytest --heap-budget` read).",
        ),
        "test_name": attr.string(doc = "The [[tests]] entry whose limits apply (heaptype check --test)."),
        "gtest_split": attr.bool(
            default = True,
            doc = "Check a GoogleTest program case by case (and deal its cases out to the shards).",
        ),
        "data": attr.label_list(allow_files = True, doc = "Files the program reads."),
        "env": attr.string_dict(doc = "Environment of the program."),
        "_runner": attr.label(default = Label("//tools:budget_test.py"), allow_single_file = True),
    }),
)

def heaptype_budget_test(name, binary, budget, args = [], test_name = None, gtest_split = True, data = [], env = {}, **kwargs):
    """`bazel test` runs `binary args...` under HeapType and checks its heap budget.

    The program runs in the test's runfiles directory, as a cc_test would. Its profile
    (<name>.htp), the per-type report (<name>.report.txt) and the budget verdict
    (<name>.budget.txt) go to $TEST_UNDECLARED_OUTPUTS_DIR (bazel-testlogs/.../test.outputs);
    an over-budget program fails the test with the budget report in its test log.

    Args:
      name: the test.
      binary: a program built with HeapType (heaptype_cc_binary, or --config=heaptype).
      budget: the TOML budget file, the format of `heaptype check` and
        `pytest --heap-budget` (its [defaults], and the [[tests]] entry `test_name`).
      args: the program's arguments; $(location) is expanded for binary and data.
      test_name: which [[tests]] entry of the budget file applies (default: the
        file's only entry, else [defaults] alone).
      gtest_split: a GoogleTest program (one whose args hold no --gtest_filter) is
        checked case by case: each case runs alone and is checked as the test
        `<test_name or name>[Suite.Case]`, which also gets the entry of
        `<test_name or name>`. With `shard_count`, each shard checks the cases
        GoogleTest would give it; together the shards check what one run checks.
        False: one run of the whole program, checked by the first shard.
      data: files the program reads at run time.
      env: the program's environment.
      **kwargs: the common test attributes (size, timeout, tags, flaky, ...).
    """
    _heaptype_budget_test(
        name = name,
        binary = binary,
        budget = budget,
        binary_args = args,
        test_name = test_name or "",
        gtest_split = gtest_split,
        data = data,
        env = env,
        **kwargs
    )
