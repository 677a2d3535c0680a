#include <cctype>

#include "document.hpp"

std::vector<Token> tokenize(const std::string& text) {
  std::vector<Token> tokens;
  std::string word;
  int line = 1;
  for (char c : text) {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      continue;
    }
    if (!word.empty()) tokens.push_back(Token{word, line});
    word.clear();
    if (c == '\n') ++line;
  }
  if (!word.empty()) tokens.push_back(Token{word, line});
  return tokens;
}

void Index::add(int document, const std::vector<Token>& tokens) {
  for (const Token& token : tokens) {
    std::shared_ptr<Entry>& entry = terms_[token.text];
    if (!entry) entry = std::make_shared<Entry>();
    if (entry->postings.empty() || entry->postings.back().document != document)
      entry->postings.push_back(Posting{document, 0});
    ++entry->postings.back().count;
  }
}

std::shared_ptr<const Entry> Index::lookup(const std::string& word) const {
  auto it = terms_.find(word);
  return it == terms_.end() ? nullptr : it->second;
}
