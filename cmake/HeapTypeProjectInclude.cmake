# HeapTypeProjectInclude.cmake: HeapType for a CMake project that does not mention it.
#
#   cmake -S . -B build -DCMAKE_PROJECT_INCLUDE=$(heaptype --cmake-dir)/HeapTypeProjectInclude.cmake
#
# CMake includes this file after each project() call of the build. It finds the
# HeapType package this file belongs to (not another one on CMAKE_PREFIX_PATH) and
# instruments every executable and library (HEAPTYPE_INSTRUMENT_ALL, unless set
# otherwise on the command line), as `find_package(HeapType)` plus
# `-DHEAPTYPE_INSTRUMENT_ALL=ON` would in the project's own CMakeLists.txt.
if(NOT DEFINED HEAPTYPE_INSTRUMENT_ALL)
  set(HEAPTYPE_INSTRUMENT_ALL ON)
endif()
find_package(HeapType CONFIG REQUIRED PATHS "${CMAKE_CURRENT_LIST_DIR}" NO_DEFAULT_PATH)
