#!/bin/sh
# heaptype-compile.sh: the C++ compiler launcher of the targets heaptype_instrument()
# types with the new macro (heaptype/new.hpp, docs/capture.md).
#
# The macro breaks one thing: code that spells `operator new` by name after it (a
# header that calls `::operator new(n)`, as jsoncpp's SecureAllocator and abseil's
# allocation functions do; a class that declares its own). Such a translation unit
# does not compile, and an unmodified project (HeapTypeProjectInclude.cmake) would stop
# there. So when a compile fails on the macro's name:
#
# 1. The header where the failing spelling is is read before the macro
#    (-DHEAPTYPE_FIRST_INCLUDE_1="header", which new.hpp includes ahead of the macro;
#    the header's include guard keeps its later inclusions empty), and the file is
#    compiled again; up to four headers. Only that header's own new-expressions are
#    untyped. No file is written: a build that checks every file a compile reads
#    (Bazel) sees only the header, one of the compile's inputs.
# 2. Else (the spelling is in the source file itself, or such a header cannot be read
#    on its own) the file is compiled without the macro (-DHEAPTYPE_NO_NEW_MACRO): its
#    new-expressions are untyped; the standard containers' typed allocator and the
#    allocator frames of call sites still name types.
#
# Either way stderr says so. Any other failure is the compiler's, shown as it is.
# Usage: heaptype-compile.sh <compiler, or another launcher and the compiler> <arguments...>

errors=$(mktemp "${TMPDIR:-/tmp}/heaptype-compile.XXXXXX") || exec "$@"

# Whether the compile whose stderr is in $errors failed on the macro's name.
failed_on_macro() {
  grep -q 'heaptype_new_macro__to_declare_an_operator_new' "$errors"
}

# file:line:col of the first error outside HeapType's own header: where `operator new` is.
failing_spelling() {
  awk '/^[^ :]+:[0-9]+:[0-9]+: error/ && !/heaptype\/define_new\.h/ { sub(/: error.*/, ""); print; exit }' "$errors"
}

# Whether the argument names a C++ source file (by its extension).
is_source() {
  case $1 in *.cpp | *.cc | *.cxx | *.C | *.c++ | *.cp | *.CPP) return 0 ;; esac
  return 1
}

finish() {
  cat "$errors" >&2
  rm -f "$errors"
  exit "$1"
}

"$@" 2>"$errors"
status=$?
if [ "$status" -eq 0 ] || ! failed_on_macro; then finish "$status"; fi

# The source file compiled, and whether the compiler looks for quoted includes in the
# directory it runs in (-iquote ., as Bazel's compiles do).
source=
quotes_here=
previous=
for argument in "$@"; do
  is_source "$argument" && [ "$previous" != "-o" ] && source=$argument
  [ "$previous" = "-iquote" ] && [ "$argument" = "." ] && quotes_here=1
  [ "$argument" = "-iquote." ] && quotes_here=1
  previous=$argument
done

# 1. The failing headers read before the macro: "$@" takes one -D more at each try.
headers=
tries=0
while [ "$tries" -lt 4 ] && failed_on_macro; do
  where=$(failing_spelling)
  header=${where%%:*}
  if [ -z "$header" ] || [ "$header" = "$source" ] || is_source "$header"; then break; fi
  case $header in *.c) break ;; esac  # an included C file: not a header to read first
  # As the compiler, run here, found it: by the same relative path where new.hpp's
  # #include finds it so (a build that checks the paths a compile read wants that
  # one), else by its absolute path.
  case $header in /*) ;; *) [ -n "$quotes_here" ] || header="$PWD/$header" ;; esac
  case " $headers " in *" $header "*) break ;; esac
  headers="$headers $header"
  tries=$((tries + 1))
  set -- "$@" "-DHEAPTYPE_FIRST_INCLUDE_$tries=\"$header\""
  "$@" 2>"$errors"
  status=$?
  if [ "$status" -eq 0 ]; then
    echo "heaptype: ${source:-a translation unit}: $where spells \`operator new\` by name: read${headers} before the new macro (its own new-expressions are untyped)" >&2
    finish 0
  fi
done
while [ "$tries" -gt 0 ]; do  # for step 2, the headers read first undone: a -U after each -D
  set -- "$@" -UHEAPTYPE_FIRST_INCLUDE_$tries
  tries=$((tries - 1))
done

# 2. Without the macro.
where=$(failing_spelling)
echo "heaptype: ${source:-a translation unit}: ${where:-its code} spells \`operator new\` by name: compiled without the new macro (its new-expressions are untyped; between heaptype/undef_new.h and define_new.h that code would keep it)" >&2
"$@" -DHEAPTYPE_NO_NEW_MACRO 2>"$errors"
finish $?
