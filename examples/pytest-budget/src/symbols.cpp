// symbols: a tiny tokenizer and symbol table, the program whose heap the budgets in
// heap-budget.toml guard.
//
//   symbols WORDS VOCABULARY [leak]
//
// It reads WORDS pseudo-random words drawn from VOCABULARY distinct ones (a fixed
// seed, so every run allocates the same), interns each word in a symbol table and
// keeps one Token per word. With `leak` it forgets to free its symbols, the kind of
// change a `leaked = 0` budget catches in CI.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

struct Token {
  uint32_t symbol;  // index into the symbol table
  uint32_t offset;  // position in the input
};

struct Symbol {
  std::string name;
  uint32_t id;
  uint32_t uses;
};

class SymbolTable {
 public:
  explicit SymbolTable(bool leak) : leak_(leak) {}
  ~SymbolTable() {
    if (!leak_)
      for (Symbol* symbol : symbols_) delete symbol;
  }

  // The symbol's id; a word seen for the first time gets a new Symbol.
  uint32_t intern(const std::string& word) {
    auto found = index_.find(word);
    if (found != index_.end()) {
      ++found->second->uses;
      return found->second->id;
    }
    Symbol* symbol = new Symbol{word, static_cast<uint32_t>(symbols_.size()), 1};
    index_.emplace(word, symbol);
    symbols_.push_back(symbol);
    return symbol->id;
  }

  size_t size() const { return symbols_.size(); }

 private:
  bool leak_;
  std::map<std::string, Symbol*> index_;
  std::vector<Symbol*> symbols_;
};

int main(int argc, char** argv) {
  const long words = argc > 1 ? std::atol(argv[1]) : 10000;
  const long vocabulary = argc > 2 ? std::atol(argv[2]) : 500;
  const bool leak = argc > 3 && !std::strcmp(argv[3], "leak");
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  SymbolTable table(leak);
  std::vector<Token> tokens;
  for (long i = 0; i < words; ++i) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    const std::string word = "w" + std::to_string(seed % static_cast<uint64_t>(vocabulary));  // short: no heap
    tokens.push_back(Token{table.intern(word), static_cast<uint32_t>(i)});
  }
  std::printf("%zu tokens, %zu symbols\n", tokens.size(), table.size());
  return 0;
}
