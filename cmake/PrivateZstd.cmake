# PrivateZstd.cmake: the runtime's objects and the zstd they use, as one object
# whose zstd symbols are local (cmake -P, from CMakeLists.txt).
#
# The runtime compresses its profile with zstd. It is linked into programs that may
# carry a zstd of their own (another version, or none at all): the runtime keeps a
# copy nobody else sees, so that linking it adds no dependency and overrides nothing.
#
#   -DOBJECTS=<runtime objects, |-separated> -DARCHIVE=<libzstd.a> -DOUTPUT=<object>
#   -DLINKER=<ld> -DNM=<nm> -DOBJCOPY=<objcopy>

foreach(var OBJECTS ARCHIVE OUTPUT LINKER NM OBJCOPY)
  if(NOT ${var})
    message(FATAL_ERROR "PrivateZstd.cmake: ${var} is not set")
  endif()
endforeach()

string(REPLACE "|" ";" OBJECTS "${OBJECTS}")
set(merged "${OUTPUT}.merged.o")
set(symbols "${OUTPUT}.zstd-symbols.txt")

# zstd's code in a section of its own, after the runtime's: the kernel maps a program's
# code a 64 KiB window (or a whole cached folio) around each page it runs, and zstd's
# 400 KiB among the runtime's functions were mapped beside them even where nothing is
# compressed. A `.text.*` name, which every linker's default layout puts in `.text` in
# input order (no orphan section for `--orphan-handling=error` to refuse).
set(zstd_archive "${OUTPUT}.zstd.a")
execute_process(COMMAND "${OBJCOPY}" --rename-section .text=.text.heaptype_zstd
                        --rename-section .text.unlikely=.text.heaptype_zstd.unlikely "${ARCHIVE}" "${zstd_archive}"
                RESULT_VARIABLE failed ERROR_VARIABLE message)
if(failed)
  message(FATAL_ERROR "copying ${ARCHIVE} with its code renamed failed: ${message}")
endif()

# One relocatable object: the runtime and the archive members it needs.
execute_process(COMMAND "${LINKER}" -r -o "${merged}" ${OBJECTS} "${zstd_archive}"
                RESULT_VARIABLE failed ERROR_VARIABLE message)
if(failed)
  message(FATAL_ERROR "linking the runtime with ${ARCHIVE} failed: ${message}")
endif()

# Every global symbol the archive defines becomes local to that object.
execute_process(COMMAND "${NM}" --defined-only --extern-only --format=posix "${ARCHIVE}"
                OUTPUT_VARIABLE listing RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "listing the symbols of ${ARCHIVE} failed")
endif()
string(REGEX MATCHALL "(^|\n)[^ \n:]+ [A-Za-z]" entries "${listing}")
set(names "")
foreach(entry IN LISTS entries)
  string(REGEX REPLACE "^\n?([^ ]+) .*$" "\\1" name "${entry}")
  string(APPEND names "${name}\n")
endforeach()
# zstd's tracing hooks are weak references in the archive; the runtime defines them (as
# no-ops) so that no program's hooks are called: they are made local too.
string(APPEND names "ZSTD_trace_compress_begin\nZSTD_trace_compress_end\n")
file(WRITE "${symbols}" "${names}")

execute_process(COMMAND "${OBJCOPY}" "--localize-symbols=${symbols}" "${merged}" "${OUTPUT}"
                RESULT_VARIABLE failed ERROR_VARIABLE message)
if(failed)
  message(FATAL_ERROR "making zstd's symbols local failed: ${message}")
endif()
file(REMOVE "${merged}" "${zstd_archive}")
