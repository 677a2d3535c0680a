// Every standard header the compiler has, so that their uses of `operator new` and
// placement new are parsed before the `new` macro exists (a project that included
// <valarray> after the macro failed to compile). Later standards' headers are guarded.
#ifndef HEAPTYPE_DETAIL_STD_HEADERS_HPP
#define HEAPTYPE_DETAIL_STD_HEADERS_HPP

#if __has_include(<algorithm>)
#include <algorithm>
#endif
#if __has_include(<any>) && __cplusplus >= 201703L
#include <any>
#endif
#if __has_include(<array>)
#include <array>
#endif
#if __has_include(<atomic>)
#include <atomic>
#endif
#if __has_include(<barrier>) && __cplusplus >= 202002L
#include <barrier>
#endif
#if __has_include(<bit>) && __cplusplus >= 202002L
#include <bit>
#endif
#if __has_include(<bitset>)
#include <bitset>
#endif
#if __has_include(<charconv>) && __cplusplus >= 201703L
#include <charconv>
#endif
#if __has_include(<chrono>)
#include <chrono>
#endif
#if __has_include(<codecvt>)
#include <codecvt>
#endif
#if __has_include(<compare>) && __cplusplus >= 202002L
#include <compare>
#endif
#if __has_include(<complex>)
#include <complex>
#endif
#if __has_include(<concepts>) && __cplusplus >= 202002L
#include <concepts>
#endif
#if __has_include(<condition_variable>)
#include <condition_variable>
#endif
#if __has_include(<coroutine>) && __cplusplus >= 202002L
#include <coroutine>
#endif
#if __has_include(<deque>)
#include <deque>
#endif
#if __has_include(<exception>)
#include <exception>
#endif
#if __has_include(<execution>) && __cplusplus >= 201703L
#include <execution>
#endif
#if __has_include(<expected>) && __cplusplus > 202002L
#include <expected>
#endif
#if __has_include(<filesystem>) && __cplusplus >= 201703L
#include <filesystem>
#endif
#if __has_include(<format>) && __cplusplus >= 202002L
#include <format>
#endif
#if __has_include(<forward_list>)
#include <forward_list>
#endif
#if __has_include(<fstream>)
#include <fstream>
#endif
#if __has_include(<functional>)
#include <functional>
#endif
#if __has_include(<future>)
#include <future>
#endif
#if __has_include(<initializer_list>)
#include <initializer_list>
#endif
#if __has_include(<iomanip>)
#include <iomanip>
#endif
#if __has_include(<ios>)
#include <ios>
#endif
#if __has_include(<iosfwd>)
#include <iosfwd>
#endif
// Not <iostream>: it uses no `new`, and each file that includes it starts the standard
// streams (a static ios_base::Init), which pages in ~400 KiB of libstdc++'s locale code
// in a program that never prints with them. <istream> and <ostream> are here.
#if __has_include(<istream>)
#include <istream>
#endif
#if __has_include(<iterator>)
#include <iterator>
#endif
#if __has_include(<latch>) && __cplusplus >= 202002L
#include <latch>
#endif
#if __has_include(<limits>)
#include <limits>
#endif
#if __has_include(<list>)
#include <list>
#endif
#if __has_include(<locale>)
#include <locale>
#endif
#if __has_include(<map>)
#include <map>
#endif
#if __has_include(<memory>)
#include <memory>
#endif
#if __has_include(<memory_resource>) && __cplusplus >= 201703L
#include <memory_resource>
#endif
#if __has_include(<mutex>)
#include <mutex>
#endif
#if __has_include(<new>)
#include <new>
#endif
#if __has_include(<numbers>) && __cplusplus >= 202002L
#include <numbers>
#endif
#if __has_include(<numeric>)
#include <numeric>
#endif
#if __has_include(<optional>) && __cplusplus >= 201703L
#include <optional>
#endif
#if __has_include(<ostream>)
#include <ostream>
#endif
#if __has_include(<queue>)
#include <queue>
#endif
#if __has_include(<random>)
#include <random>
#endif
#if __has_include(<ranges>) && __cplusplus >= 202002L
#include <ranges>
#endif
#if __has_include(<ratio>)
#include <ratio>
#endif
#if __has_include(<regex>)
#include <regex>
#endif
#if __has_include(<scoped_allocator>)
#include <scoped_allocator>
#endif
#if __has_include(<semaphore>) && __cplusplus >= 202002L
#include <semaphore>
#endif
#if __has_include(<set>)
#include <set>
#endif
#if __has_include(<shared_mutex>)
#include <shared_mutex>
#endif
#if __has_include(<source_location>) && __cplusplus >= 202002L
#include <source_location>
#endif
#if __has_include(<span>) && __cplusplus >= 202002L
#include <span>
#endif
#if __has_include(<spanstream>) && __cplusplus > 202002L
#include <spanstream>
#endif
#if __has_include(<sstream>)
#include <sstream>
#endif
#if __has_include(<stack>)
#include <stack>
#endif
#if __has_include(<stacktrace>) && __cplusplus > 202002L
#include <stacktrace>
#endif
#if __has_include(<stdexcept>)
#include <stdexcept>
#endif
#if __has_include(<stop_token>) && __cplusplus >= 202002L
#include <stop_token>
#endif
#if __has_include(<streambuf>)
#include <streambuf>
#endif
#if __has_include(<string>)
#include <string>
#endif
#if __has_include(<string_view>) && __cplusplus >= 201703L
#include <string_view>
#endif
#if __has_include(<syncstream>) && __cplusplus >= 202002L
#include <syncstream>
#endif
#if __has_include(<system_error>)
#include <system_error>
#endif
#if __has_include(<thread>)
#include <thread>
#endif
#if __has_include(<tuple>)
#include <tuple>
#endif
#if __has_include(<type_traits>)
#include <type_traits>
#endif
#if __has_include(<typeindex>)
#include <typeindex>
#endif
#if __has_include(<typeinfo>)
#include <typeinfo>
#endif
#if __has_include(<unordered_map>)
#include <unordered_map>
#endif
#if __has_include(<unordered_set>)
#include <unordered_set>
#endif
#if __has_include(<utility>)
#include <utility>
#endif
#if __has_include(<valarray>)
#include <valarray>
#endif
#if __has_include(<variant>) && __cplusplus >= 201703L
#include <variant>
#endif
#if __has_include(<vector>)
#include <vector>
#endif
#if __has_include(<version>) && __cplusplus >= 202002L
#include <version>
#endif
#if __has_include(<cassert>)
#include <cassert>
#endif
#if __has_include(<cctype>)
#include <cctype>
#endif
#if __has_include(<cerrno>)
#include <cerrno>
#endif
#if __has_include(<cfenv>)
#include <cfenv>
#endif
#if __has_include(<cfloat>)
#include <cfloat>
#endif
#if __has_include(<cinttypes>)
#include <cinttypes>
#endif
#if __has_include(<climits>)
#include <climits>
#endif
#if __has_include(<clocale>)
#include <clocale>
#endif
#if __has_include(<cmath>)
#include <cmath>
#endif
#if __has_include(<csetjmp>)
#include <csetjmp>
#endif
#if __has_include(<csignal>)
#include <csignal>
#endif
#if __has_include(<cstdarg>)
#include <cstdarg>
#endif
#if __has_include(<cstddef>)
#include <cstddef>
#endif
#if __has_include(<cstdint>)
#include <cstdint>
#endif
#if __has_include(<cstdio>)
#include <cstdio>
#endif
#if __has_include(<cstdlib>)
#include <cstdlib>
#endif
#if __has_include(<cstring>)
#include <cstring>
#endif
#if __has_include(<ctime>)
#include <ctime>
#endif
#if __has_include(<cuchar>)
#include <cuchar>
#endif
#if __has_include(<cwchar>)
#include <cwchar>
#endif
#if __has_include(<cwctype>)
#include <cwctype>
#endif
#if __has_include(<ext/pool_allocator.h>)
#include <ext/pool_allocator.h>
#endif
#if __has_include(<ext/malloc_allocator.h>)
#include <ext/malloc_allocator.h>
#endif
#if __has_include(<ext/mt_allocator.h>)
#include <ext/mt_allocator.h>
#endif
#if __has_include(<ext/bitmap_allocator.h>)
#include <ext/bitmap_allocator.h>
#endif
#if __has_include(<ext/new_allocator.h>)
#include <ext/new_allocator.h>
#endif

#endif
