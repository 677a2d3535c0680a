// local_lambda.cpp: a lambda written in a function with internal linkage, run by a
// std::thread, its operator() inlined into std::thread's invoker. GCC's DWARF gives that
// operator() no linkage name and its closure type no name, and the scope index of
// namespaces and classes does not hold a class local to a function's body: the --inlined
// frame was a bare "operator()". test_callpaths.py.
#include <cstdio>
#include <thread>
#include <vector>

struct Job {
  long v[3];
};

std::vector<Job*> g_jobs;

static void run_jobs(int n) {
  std::thread worker([n] {
    for (int i = 0; i < n; ++i) g_jobs.push_back(new Job{{i, i, i}});
  });
  worker.join();
}

int main() {
  run_jobs(5);
  for (Job* job : g_jobs) delete job;
  std::printf("%zu\n", g_jobs.size());
  return 0;
}
