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
#    (-DHEAPTYPE_FIRST_INCLUDES names a file of #includes written beside the object
#    file, which new.hpp includes ahead of the macro; the header's include guard keeps
#    its later inclusions empty), and the file is compiled again; up to four headers.
#    Only that header's own new-expressions are untyped.
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

# The source file compiled and the object file written.
source=
object=
previous=
for argument in "$@"; do
  is_source "$argument" && [ "$previous" != "-o" ] && source=$argument
  [ "$previous" = "-o" ] && object=$argument
  previous=$argument
done

# 1. The failing headers read before the macro.
if [ -n "$object" ]; then
  first_includes="$object.heaptype-first-includes.h"
  case $first_includes in /*) ;; *) first_includes="$PWD/$first_includes" ;; esac  # new.hpp includes it
  : > "$first_includes" || first_includes=
  headers=
  tries=0
  while [ -n "$first_includes" ] && [ "$tries" -lt 4 ] && failed_on_macro; do
    where=$(failing_spelling)
    header=${where%%:*}
    if [ -z "$header" ] || [ "$header" = "$source" ] || is_source "$header"; then break; fi
    case $header in *.c) break ;; esac  # an included C file: not a header to read first
    case $header in /*) ;; *) header="$PWD/$header" ;; esac  # as the compiler, run here, found it
    case " $headers " in *" $header "*) break ;; esac
    headers="$headers $header"
    printf '#include "%s"\n' "$header" >> "$first_includes"
    "$@" "-DHEAPTYPE_FIRST_INCLUDES=\"$first_includes\"" 2>"$errors"
    status=$?
    if [ "$status" -eq 0 ]; then
      echo "heaptype: ${source:-a translation unit}: $where spells \`operator new\` by name: read${headers} before the new macro (its own new-expressions are untyped)" >&2
      finish 0
    fi
    tries=$((tries + 1))
  done
fi

# 2. Without the macro.
where=$(failing_spelling)
echo "heaptype: ${source:-a translation unit}: ${where:-its code} spells \`operator new\` by name: compiled without the new macro (its new-expressions are untyped; between heaptype/undef_new.h and define_new.h that code would keep it)" >&2
"$@" -DHEAPTYPE_NO_NEW_MACRO 2>"$errors"
finish $?
