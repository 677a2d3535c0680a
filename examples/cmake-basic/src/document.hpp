// A tiny document indexer: the example program HeapType's demo profiles.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

struct Token {
  std::string text;
  int line;
};

struct Posting {
  int document;
  int count;
};

struct Entry {
  std::vector<Posting> postings;
};

// Splits text into lowercase words, one Token each.
std::vector<Token> tokenize(const std::string& text);

class Index {
 public:
  void add(int document, const std::vector<Token>& tokens);
  std::shared_ptr<const Entry> lookup(const std::string& word) const;
  size_t size() const { return terms_.size(); }

 private:
  std::map<std::string, std::shared_ptr<Entry>> terms_;
};

// A most-recently-used list of query results, kept as a linked list.
struct CacheNode {
  std::string query;
  std::shared_ptr<const Entry> result;
  CacheNode* next;
};
