// profile_fuzzer.cpp: libFuzzer target for the profile reader and the analysis core
// (src/format, src/core), without Python. Each input is a whole profile file: it is
// opened, indexed, decoded and analysed with every view on (call trees, functions,
// timeline, spans, addresses, filters), then exported. Any crash, sanitizer report,
// leak or allocation past -rss_limit_mb / -malloc_limit_mb is a finding.
//
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
//       tests/fuzz/profile_fuzzer.cpp src/format/*.cpp src/core/*.cpp \
//       src/core/exports/*.cpp src/core/symbolize/*.cpp -ldw -lelf -o profile_fuzzer
//   ./profile_fuzzer -max_len=4096 corpus/      (tests/python/test_fuzz.py writes a seed corpus)
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "core/analysis.hpp"
#include "core/exports/exports.hpp"
#include "core/symbolize/module_map.hpp"
#include "format/profile_file.hpp"

namespace {

using heaptype::core::Analysis;
using heaptype::core::AnalysisOptions;

// ProfileFile reads a path: the input goes to one memory file, reopened by name.
std::string input_path(const uint8_t* data, size_t size) {
  static int fd = memfd_create("profile", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0) abort();
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) abort();
    done += static_cast<size_t>(n);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

heaptype::core::TableCodeNames& code_names() {
  // A few names, so that type naming and inference from allocator frames run too.
  static heaptype::core::TableCodeNames* names = [] {
    auto* n = new heaptype::core::TableCodeNames;
    n->types[0x40] = "Token";
    n->types[0x50] = "std::vector<int, std::allocator<int> >";
    heaptype::core::CodeInfo info;
    info.function = "std::__new_allocator<Token>::allocate(unsigned long, void const*)";
    n->call_sites[0x10] = info;
    return n;
  }();
  return *names;
}

void analyse(const heaptype::format::ProfileFile& file, AnalysisOptions options) {
  Analysis analysis(file, &code_names(), std::move(options));
  analysis.run();
  std::string out;
  heaptype::core::folded(analysis, "bytes", &out);
  heaptype::core::tree_json(analysis, false, "peak", 3, &out);
  if (analysis.options().bottom_up) heaptype::core::tree_json(analysis, true, "bytes", 0, &out);
  heaptype::core::pprof_text(analysis, file.modules());
  for (AnalysisOptions::Series grouping : analysis.options().timelines)
    if (const heaptype::core::Timeline* timeline = analysis.timeline(grouping))
      for (uint32_t id : {0u, 1u, 7u, 0xffffffffu}) timeline->series(id);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    heaptype::format::ProfileFile file(input_path(data, size));
    heaptype::symbolize::parse_module_map(file.modules());

    AnalysisOptions everything;
    everything.call_tree = everything.bottom_up = everything.functions = true;
    everything.addresses = true;
    everything.timelines = {AnalysisOptions::Series::kType, AnalysisOptions::Series::kThread,
                            AnalysisOptions::Series::kFunction, AnalysisOptions::Series::kCallPath};
    everything.timeline_points = 16;
    everything.bucket_ends = {1, 10, 1000};
    analyse(file, everything);

    AnalysisOptions filtered;  // a window, filters and a stop: the other paths of the pass
    filtered.types = {"Tok*", "(untyped)"};
    filtered.threads = {1, 0xffffffffu};
    filtered.functions_on_path = {"*alloc*"};
    filtered.min_size = 8;
    filtered.window_begin = 2;
    filtered.window_end = 100;
    filtered.stop_after_events = 50;
    filtered.timelines = {AnalysisOptions::Series::kCallPath};
    analyse(file, filtered);
  } catch (const heaptype::format::ProfileError&) {
    // Not a profile at all (no magic, a bad version): the one error the reader throws.
  }
  return 0;
}
