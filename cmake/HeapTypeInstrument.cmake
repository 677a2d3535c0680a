# heaptype_instrument(<target>
#     [CALLSTACK instrument|frame-pointer|none]   calling contexts (default: flags.json's
#                             default_callstack, frame-pointer)
#     [TYPES ON|OFF]          type every new-expression (force-included heaptype/new.hpp)
#     [STL_TYPES ON|OFF]      type std::allocator allocations (libstdc++ shim)
#     [MAP_FILE ON|OFF]       write <binary>.map, to name types of stripped binaries
#     [EXCLUDE <dir>...])     more directories whose code is not instrumented
#
# A target typed by the new macro compiles through heaptype-compile.sh (prepended to its
# CXX_COMPILER_LAUNCHER): a file that spells `operator new` by name, which the macro cannot
# compile, is compiled again without it, and the build says so (docs/capture.md).
# -DHEAPTYPE_MACRO_FALLBACK=OFF leaves the compiler's error instead.
#
# -DHEAPTYPE_CAPTURE=auto|macro|type-aware picks how new-expressions report their types
# (default auto: type-aware for Clang 21 or later, else the new macro; see docs/capture.md).
#
# Adds PRIVATE compile options to <target>; executables also link the static
# runtime. Shared libraries get the compile options only: they use the runtime of
# the executable that loads them (link HeapType::runtime_shared to a shared library
# that may be dlopen'ed by an executable built without HeapType). Calling it twice
# on a target changes nothing.
#
# The flags come from the package's flags.json, the list `heaptype --cflags` prints.

set(HeapType_COMPILE_LAUNCHER "${CMAKE_CURRENT_LIST_DIR}/heaptype-compile.sh")
file(READ "${HeapType_FLAGS_FILE}" _heaptype_flags)
string(JSON HEAPTYPE_DEFAULT_CALLSTACK GET "${_heaptype_flags}" default_callstack)
unset(_heaptype_flags)

function(_heaptype_options_from_json out json)
  # Turns a JSON array of token arrays into CMake options ("SHELL:" for multi-token).
  set(result "")
  string(JSON n LENGTH "${json}")
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON option GET "${json}" ${i})
      string(JSON tokens LENGTH "${option}")
      math(EXPR last_token "${tokens} - 1")
      set(words "")
      foreach(j RANGE ${last_token})
        string(JSON token GET "${option}" ${j})
        string(REPLACE "{include}" "${HeapType_INCLUDE_DIR}" token "${token}")
        string(REPLACE "{stl_shim}" "${HeapType_STL_SHIM_DIR}" token "${token}")
        string(REPLACE "{lib}" "${HeapType_LIBRARY_DIR}" token "${token}")
        string(REPLACE "{exclude}" "${HEAPTYPE_EXCLUDE_LIST}" token "${token}")
        list(APPEND words "${token}")
      endforeach()
      list(LENGTH words count)
      if(count GREATER 1)
        list(JOIN words " " joined)
        list(APPEND result "SHELL:${joined}")
      else()
        list(APPEND result "${words}")
      endif()
    endforeach()
  endif()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# The -Wl options of flags.json's link.static (beyond the library and -pthread, which
# the imported targets carry), as LINKER: options.
# A linker without --export-dynamic-symbol (zig's, behind the ziglang wheel's Clang)
# exports every symbol instead (-rdynamic), as `heaptype --ldflags --cxx` does.
function(heaptype_static_link_options out)
  file(READ "${HeapType_FLAGS_FILE}" flags)
  string(JSON json GET "${flags}" link static)
  _heaptype_options_from_json(options "${json}")
  set(exports_symbols TRUE)
  if(CMAKE_CXX_COMPILER_LOADED AND NOT CMAKE_VERSION VERSION_LESS 3.18)
    include(CheckLinkerFlag)
    check_linker_flag(CXX "LINKER:--export-dynamic-symbol=heaptype_start" HEAPTYPE_LINKER_EXPORTS_SYMBOLS)
    set(exports_symbols ${HEAPTYPE_LINKER_EXPORTS_SYMBOLS})
  endif()
  set(result "")
  foreach(option IN LISTS options)
    if(option MATCHES "^-Wl,(.*)$")
      # Kept before the next MATCHES, which CMake evaluates even when exports_symbols
      # is true, and which sets CMAKE_MATCH_1 to "" (it has no group).
      set(linker_option "${CMAKE_MATCH_1}")
      if(exports_symbols OR NOT linker_option MATCHES "^--export-dynamic-symbol=")
        list(APPEND result "LINKER:${linker_option}")
      else()
        list(APPEND result "-rdynamic")
      endif()
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# heaptype_capture_mode(<out-var>): how new-expressions report their types
# (docs/capture.md): HEAPTYPE_CAPTURE when it is macro or type-aware, else (auto)
# type-aware for Clang at or above flags.json's type_aware_min_clang, the macro for
# any other compiler. Said once per configure.
function(heaptype_capture_mode out)
  file(READ "${HeapType_FLAGS_FILE}" flags)
  string(JSON min_clang GET "${flags}" type_aware_min_clang)
  set(requested "${HEAPTYPE_CAPTURE}")
  if(requested STREQUAL "")
    set(requested auto)
  endif()
  if(NOT requested MATCHES "^(auto|macro|type-aware)$")
    message(FATAL_ERROR "HEAPTYPE_CAPTURE takes auto, macro or type-aware, not '${requested}'")
  endif()
  set(compiler "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
  if(NOT requested STREQUAL "auto")
    set(mode ${requested})
    set(why "${compiler}, forced by HEAPTYPE_CAPTURE")
  elseif(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND NOT CMAKE_CXX_COMPILER_VERSION VERSION_LESS min_clang)
    set(mode type-aware)
    set(why "${compiler}: type-aware allocation; translation units below C++20 take the macro")
  else()
    set(mode macro)
    set(why "${compiler}: no type-aware allocation (Clang ${min_clang} or later has it)")
  endif()
  get_property(said GLOBAL PROPERTY HEAPTYPE_CAPTURE_SAID)
  if(NOT said)
    set_property(GLOBAL PROPERTY HEAPTYPE_CAPTURE_SAID TRUE)
    message(STATUS "HeapType: type capture: ${mode} (${why})")
  endif()
  set(${out} ${mode} PARENT_SCOPE)
endfunction()

# heaptype_compile_options(<out-var> TYPES ON|OFF STL_TYPES ON|OFF CALLSTACK <mode>
#                          [EXCLUDE <dir>...])
function(heaptype_compile_options out)
  cmake_parse_arguments(PARSE_ARGV 1 HT "" "TYPES;STL_TYPES;CALLSTACK" "EXCLUDE")
  file(READ "${HeapType_FLAGS_FILE}" flags)
  set(exclude ${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES} "${HeapType_INCLUDE_DIR}" ${HT_EXCLUDE})
  list(JOIN exclude "," HEAPTYPE_EXCLUDE_LIST)
  set(options "")
  set(groups headers)
  if(HT_TYPES)
    list(APPEND groups types)
  endif()
  if(HT_STL_TYPES)
    list(APPEND groups stl_types)
  endif()
  foreach(group IN LISTS groups)
    string(JSON json GET "${flags}" compile ${group})
    _heaptype_options_from_json(group_options "${json}")
    list(APPEND options ${group_options})
  endforeach()
  if(HT_TYPES)
    heaptype_capture_mode(capture)
    string(JSON json GET "${flags}" compile capture ${capture})
    _heaptype_options_from_json(capture_options "${json}")
    list(APPEND options ${capture_options})
  endif()
  foreach(compiler GNU Clang)
    string(JSON json GET "${flags}" callstack ${HT_CALLSTACK} ${compiler})
    _heaptype_options_from_json(stack_options "${json}")
    foreach(option IN LISTS stack_options)
      if(compiler STREQUAL "Clang")
        list(APPEND options "$<$<CXX_COMPILER_ID:Clang,AppleClang>:${option}>")
      else()
        list(APPEND options "$<$<CXX_COMPILER_ID:${compiler}>:${option}>")
      endif()
    endforeach()
  endforeach()
  set(${out} "${options}" PARENT_SCOPE)
endfunction()

# The target's C++ compiles go through heaptype-compile.sh, ahead of any launcher it
# has (ccache): files that spell `operator new` by name build without the macro. A
# compile that succeeds (every one in the type-aware mode, which has no macro) passes
# through it unchanged. Not with HEAPTYPE_MACRO_FALLBACK OFF.
function(_heaptype_compile_through_fallback target)
  if(DEFINED HEAPTYPE_MACRO_FALLBACK AND NOT HEAPTYPE_MACRO_FALLBACK)
    return()
  endif()
  get_target_property(launcher ${target} CXX_COMPILER_LAUNCHER)
  if(NOT launcher)
    set(launcher "")
  endif()
  set_property(TARGET ${target} PROPERTY CXX_COMPILER_LAUNCHER /bin/sh "${HeapType_COMPILE_LAUNCHER}" ${launcher})
endfunction()

function(heaptype_instrument target)
  cmake_parse_arguments(PARSE_ARGV 1 HT "" "CALLSTACK;TYPES;STL_TYPES;MAP_FILE" "EXCLUDE")
  if(HT_UNPARSED_ARGUMENTS)
    list(GET HT_UNPARSED_ARGUMENTS 0 unknown)
    message(FATAL_ERROR "heaptype_instrument(${target}): unknown argument '${unknown}' "
                        "(expected CALLSTACK, TYPES, STL_TYPES, MAP_FILE, EXCLUDE)")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "heaptype_instrument(${target}): no such target")
  endif()
  get_target_property(type ${target} TYPE)
  if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
    message(FATAL_ERROR "heaptype_instrument(${target}): cannot instrument a ${type} target: "
                        "instrument the executables and libraries that compile code")
  endif()
  foreach(switch TYPES STL_TYPES MAP_FILE)
    if(NOT DEFINED HT_${switch})
      set(HT_${switch} ON)
    endif()
    if(NOT HT_${switch} MATCHES "^(ON|OFF|TRUE|FALSE|YES|NO|1|0)$")
      message(FATAL_ERROR "heaptype_instrument(${target}): ${switch} takes ON or OFF, not '${HT_${switch}}'")
    endif()
  endforeach()
  if(NOT DEFINED HT_CALLSTACK)
    set(HT_CALLSTACK ${HEAPTYPE_DEFAULT_CALLSTACK})
  endif()
  if(NOT HT_CALLSTACK MATCHES "^(instrument|frame-pointer|none)$")
    message(FATAL_ERROR "heaptype_instrument(${target}): CALLSTACK takes instrument, frame-pointer "
                        "or none, not '${HT_CALLSTACK}'")
  endif()
  get_target_property(done ${target} HEAPTYPE_INSTRUMENTED)
  if(done)
    return()
  endif()
  set_target_properties(${target} PROPERTIES HEAPTYPE_INSTRUMENTED ON)

  heaptype_compile_options(options TYPES ${HT_TYPES} STL_TYPES ${HT_STL_TYPES}
                           CALLSTACK ${HT_CALLSTACK} EXCLUDE ${HT_EXCLUDE})
  target_compile_options(${target} PRIVATE ${options})
  if(HT_TYPES)
    _heaptype_compile_through_fallback(${target})
  endif()
  if(type STREQUAL "EXECUTABLE")
    # The LINK_LIBRARIES property, not target_link_libraries(): CMake refuses to mix
    # its plain and keyword signatures on one target, and existing projects use both.
    set_property(TARGET ${target} APPEND PROPERTY LINK_LIBRARIES HeapType::runtime)
  endif()
  # zig's linker (the ziglang wheel's Clang) writes no map file: the ELF symbol table names the types then.
  if(HT_MAP_FILE AND CMAKE_CXX_COMPILER_LOADED AND NOT CMAKE_VERSION VERSION_LESS 3.18)
    include(CheckLinkerFlag)
    check_linker_flag(CXX "LINKER:-Map=${CMAKE_BINARY_DIR}/heaptype_map_check.map" HEAPTYPE_LINKER_WRITES_MAPS)
    if(NOT HEAPTYPE_LINKER_WRITES_MAPS)
      set(HT_MAP_FILE OFF)
    endif()
  endif()
  if(HT_MAP_FILE AND type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
    target_link_options(${target} PRIVATE "LINKER:-Map=$<TARGET_FILE:${target}>.map")
  endif()
endfunction()

# The targets of `dir` and of its subdirectories, recursively.
function(_heaptype_targets_below out dir)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _heaptype_targets_below(below "${sub}")
    list(APPEND targets ${below})
  endforeach()
  set(${out} "${targets}" PARENT_SCOPE)
endfunction()

# Instruments every executable and library of the project, once all are defined.
function(_heaptype_instrument_all)
  _heaptype_targets_below(targets "${CMAKE_SOURCE_DIR}")
  set(count 0)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(links ${target} LINK_LIBRARIES)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$"
       OR "HeapType::instrument" IN_LIST links)
      continue()
    endif()
    heaptype_instrument(${target} CALLSTACK ${HEAPTYPE_CALLSTACK} MAP_FILE ${HEAPTYPE_MAP_FILES})
    math(EXPR count "${count} + 1")
  endforeach()
  # what the targets got: a linker that writes no map file (zig's) turned them off
  set(maps "${HEAPTYPE_MAP_FILES}")
  if(HEAPTYPE_MAP_FILES AND DEFINED HEAPTYPE_LINKER_WRITES_MAPS AND NOT HEAPTYPE_LINKER_WRITES_MAPS)
    set(maps "OFF: the linker writes none, the symbol table names the types")
  endif()
  message(STATUS "HeapType: instrumented ${count} targets (HEAPTYPE_INSTRUMENT_ALL, "
                 "CALLSTACK ${HEAPTYPE_CALLSTACK}, map files ${maps})")
endfunction()

# Schedules _heaptype_instrument_all at the end of the top-level CMakeLists.txt, once
# however often find_package(HeapType) runs.
function(heaptype_instrument_all_later)
  if(NOT HEAPTYPE_CALLSTACK MATCHES "^(instrument|frame-pointer|none)$")
    message(FATAL_ERROR "HEAPTYPE_CALLSTACK takes instrument, frame-pointer or none, not '${HEAPTYPE_CALLSTACK}'")
  endif()
  get_property(scheduled GLOBAL PROPERTY HEAPTYPE_INSTRUMENT_ALL_SCHEDULED)
  if(NOT scheduled)
    set_property(GLOBAL PROPERTY HEAPTYPE_INSTRUMENT_ALL_SCHEDULED TRUE)
    cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _heaptype_instrument_all)
  endif()
endfunction()

# heaptype_add_test(NAME <name> COMMAND <command> [<arg>...] BUDGET <file.toml>
#                   [BUDGET_TEST <entry>] [WORKING_DIRECTORY <dir>])
#
# A CTest test that runs the command with profiling on and fails when the profile
# exceeds the budget file's limits: the same budget files, engine and failure
# report as `pytest --heap-budget` and `heaptype check`. BUDGET_TEST names the
# [[tests]] entry to apply (default: <name>). The profile is kept as
# <build dir>/heaptype/<name>.htp for inspection.
function(heaptype_add_test)
  cmake_parse_arguments(PARSE_ARGV 0 HT "" "NAME;BUDGET;BUDGET_TEST;WORKING_DIRECTORY" "COMMAND")
  if(HT_UNPARSED_ARGUMENTS)
    list(GET HT_UNPARSED_ARGUMENTS 0 unknown)
    message(FATAL_ERROR "heaptype_add_test: unknown argument '${unknown}' "
                        "(expected NAME, COMMAND, BUDGET, BUDGET_TEST, WORKING_DIRECTORY)")
  endif()
  foreach(required NAME COMMAND BUDGET)
    if(NOT HT_${required})
      message(FATAL_ERROR "heaptype_add_test: ${required} is required")
    endif()
  endforeach()
  get_filename_component(budget "${HT_BUDGET}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${budget}")
    message(FATAL_ERROR "heaptype_add_test(${HT_NAME}): budget file ${budget} does not exist")
  endif()
  if(NOT HT_BUDGET_TEST)
    set(HT_BUDGET_TEST "${HT_NAME}")
  endif()
  if(NOT HEAPTYPE_EXECUTABLE)
    # The console script installed with this package: <prefix>/bin/heaptype.
    get_filename_component(prefix "${HEAPTYPE_PACKAGE_DIR}/../../../.." ABSOLUTE)
    find_program(HEAPTYPE_EXECUTABLE heaptype HINTS "${prefix}/bin" DOC "the heaptype command")
    if(NOT HEAPTYPE_EXECUTABLE)
      message(FATAL_ERROR "heaptype_add_test: the `heaptype` command was not found "
                          "(set HEAPTYPE_EXECUTABLE, or put the venv's bin directory on PATH)")
    endif()
  endif()
  # A target name as the program means its file, as in add_test().
  list(GET HT_COMMAND 0 program)
  if(TARGET ${program})
    list(REMOVE_AT HT_COMMAND 0)
    list(INSERT HT_COMMAND 0 "$<TARGET_FILE:${program}>")
  endif()
  set(profile "${CMAKE_CURRENT_BINARY_DIR}/heaptype/${HT_NAME}.htp")
  set(workdir)
  if(HT_WORKING_DIRECTORY)
    set(workdir WORKING_DIRECTORY "${HT_WORKING_DIRECTORY}")
  endif()
  add_test(NAME ${HT_NAME}
    COMMAND "${HEAPTYPE_EXECUTABLE}" run -o "${profile}" --budget "${budget}" --budget-test "${HT_BUDGET_TEST}"
            -- ${HT_COMMAND}
    ${workdir})
  file(MAKE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}/heaptype")
endfunction()
