// std::filesystem::path, whose out-of-line members in libstdc++.so (fs_path.cc) keep a
// path's list of components in blocks they allocate in functions without a symbol.
// Builds `paths` paths (argv[1], default 9), keeps the odd ones live at exit (in a vector
// never freed), and prints how many it keeps.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

int main(int argc, char** argv) {
  int paths = argc > 1 ? std::atoi(argv[1]) : 9;
  auto& kept = *new std::vector<std::filesystem::path>;
  kept.reserve(paths);
  for (int i = 0; i < paths; ++i) {
    std::filesystem::path p("/usr/lib/x86_64-linux-gnu");
    p /= "plugin-" + std::to_string(i);
    p /= "settings.conf";
    if (i % 2) kept.push_back(std::move(p));  // moved: its blocks, not copies
  }
  std::printf("kept=%zu\n", kept.size());
  return 0;
}
