// Indexes a generated corpus, answers queries through a small cache, and leaks
// the cache's last node on purpose: the demo's report shows it live at exit.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "document.hpp"

static std::string make_document(int n) {
  static const char* words[] = {"heap", "type", "profile", "allocation", "vector", "map",
                                "string", "memory", "budget", "pointer", "object", "node"};
  std::string text;
  for (int i = 0; i < 400; ++i) {
    text += words[(n * 7 + i * 13) % 12];
    text += (i % 10 == 9) ? '\n' : ' ';
  }
  return text;
}

int main(int argc, char** argv) {
  int documents = argc > 1 ? std::atoi(argv[1]) : 200;
  Index index;
  for (int d = 0; d < documents; ++d) index.add(d, tokenize(make_document(d)));

  CacheNode* cache = nullptr;
  const char* queries[] = {"heap", "budget", "node", "missing", "vector"};
  for (int round = 0; round < 50; ++round) {
    const char* q = queries[round % 5];
    CacheNode* node = new CacheNode{q, index.lookup(q), cache};
    cache = node;
    if (round % 5 == 4) {  // keep the cache short: drop all but the newest node
      for (CacheNode* old = cache->next; old;) {
        CacheNode* next = old->next;
        delete old;
        old = next;
      }
      cache->next = nullptr;
    }
  }
  std::printf("indexed %d documents, %zu distinct words; cache holds '%s'\n", documents, index.size(),
              cache->query.c_str());
  return 0;  // `cache` is never deleted: one CacheNode leaks
}
