// dom_parser.cpp: a call-heavy allocation workload for bench/run_bench.py.
//
// A DOM-style parser of the kind real code bases have: a generated XML-like
// document (fixed PRNG seed, identical every run) is parsed into a tree of Element
// objects by a recursive-descent Parser made of many small member functions (peek,
// advance, skip_space, read_name, ...), which the compiler inlines, so a call-per-
// function profiler pays on every character while an allocation-time one pays only
// per allocation. Each round parses the document, queries the tree and frees it.
//
// Arguments: [elements=150000] [rounds=3]; `0 0` is the almost empty run. It prints
// its own ground truth on stderr (the number of operator-new calls its own code
// issues, the checksum, VmHWM), like ../../shared/bench/alloc_bench.cpp.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

uint64_t g_new_calls = 0;  // operator-new calls issued by this program's own code (counted where they happen)

// --- the document ---------------------------------------------------------------------

struct Rng {
  uint64_t s = 0x2545F4914F6CDD1Dull;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  unsigned below(unsigned n) { return static_cast<unsigned>(next() % n); }
};

const char* const kNames[] = {"configuration-section", "dependency-descriptor", "transformation-step",
                              "resource-reference", "validation-constraint", "property-assignment",
                              "item", "entry", "attribute-group-definition", "source-location"};
const char* const kAttributes[] = {"identifier", "kind", "priority", "description-text", "enabled", "owner"};

void append_text(std::string& out, Rng& rng, unsigned length) {
  for (unsigned i = 0; i < length; ++i) out.push_back(static_cast<char>('a' + rng.below(26)));
}

// Appends one element with its subtree; `budget` counts the elements still to write.
void generate_element(std::string& out, Rng& rng, unsigned depth, long& budget) {
  --budget;
  const char* name = kNames[rng.below(10)];
  out += '<';
  out += name;
  for (unsigned a = rng.below(4); a > 0; --a) {
    out += ' ';
    out += kAttributes[rng.below(6)];
    out += "=\"";
    append_text(out, rng, 8 + rng.below(30));
    out += '"';
  }
  out += '>';
  if (depth < 12 && rng.below(10) < 7) {
    for (unsigned c = 1 + rng.below(6); c > 0 && budget > 0; --c) generate_element(out, rng, depth + 1, budget);
  } else {
    append_text(out, rng, 4 + rng.below(40));
  }
  out += "</";
  out += name;
  out += '>';
}

std::string generate_document(long elements) {
  std::string out;
  out.reserve(static_cast<size_t>(elements) * 90 + 64);
  Rng rng;
  out += "<document>";
  long budget = elements;
  while (budget > 0) generate_element(out, rng, 1, budget);
  out += "</document>";
  return out;
}

// --- the tree ---------------------------------------------------------------------------

struct Attribute {
  std::string name;
  std::string value;
};

class Element {
 public:
  explicit Element(std::string name) : name_(std::move(name)) {}
  Element(const Element&) = delete;
  Element& operator=(const Element&) = delete;

  const std::string& name() const { return name_; }
  const std::string& text() const { return text_; }
  const std::vector<Attribute>& attributes() const { return attributes_; }
  const std::vector<std::unique_ptr<Element>>& children() const { return children_; }

  void add_attribute(std::string name, std::string value) {
    size_t before = attributes_.capacity();
    attributes_.push_back(Attribute{std::move(name), std::move(value)});
    if (attributes_.capacity() != before) ++g_new_calls;
  }
  Element* add_child(std::unique_ptr<Element> child) {
    size_t before = children_.capacity();
    children_.push_back(std::move(child));
    if (children_.capacity() != before) ++g_new_calls;
    return children_.back().get();
  }
  void set_text(std::string text) { text_ = std::move(text); }

  const std::string* attribute(const char* name) const {
    for (const Attribute& a : attributes_)
      if (a.name == name) return &a.value;
    return nullptr;
  }

 private:
  std::string name_;
  std::string text_;
  std::vector<Attribute> attributes_;
  std::vector<std::unique_ptr<Element>> children_;
};

// A string of `length` characters from the input: counts its heap buffer.
std::string make_string(const char* begin, size_t length) {
  if (length > 15) ++g_new_calls;  // libstdc++'s small-string buffer holds 15
  return std::string(begin, length);
}

// --- the parser: small member functions -------------------------------------------------

class Parser {
 public:
  explicit Parser(const std::string& input) : p_(input.data()), end_(input.data() + input.size()) {}

  std::unique_ptr<Element> parse_document() { return parse_element(); }

 private:
  bool at_end() const { return p_ == end_; }
  char peek() const { return at_end() ? '\0' : *p_; }
  void advance() { ++p_; }
  bool accept(char c) {
    if (peek() != c) return false;
    advance();
    return true;
  }
  void expect(char c) {
    if (!accept(c)) fail("unexpected character");
  }
  static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
  static bool is_name_char(char c) { return (c >= 'a' && c <= 'z') || c == '-' || c == '_' || (c >= '0' && c <= '9'); }
  void skip_space() {
    while (is_space(peek())) advance();
  }
  [[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "parse error: %s\n", what);
    std::exit(2);
  }

  std::string read_name() {
    const char* begin = p_;
    while (is_name_char(peek())) advance();
    if (p_ == begin) fail("name expected");
    return make_string(begin, static_cast<size_t>(p_ - begin));
  }
  std::string read_until(char stop) {
    const char* begin = p_;
    while (!at_end() && peek() != stop) advance();
    return make_string(begin, static_cast<size_t>(p_ - begin));
  }
  std::string read_quoted() {
    expect('"');
    std::string value = read_until('"');
    expect('"');
    return value;
  }
  void parse_attribute(Element& element) {
    std::string name = read_name();
    skip_space();
    expect('=');
    skip_space();
    element.add_attribute(std::move(name), read_quoted());
  }
  void parse_attributes(Element& element) {
    for (skip_space(); is_name_char(peek()); skip_space()) parse_attribute(element);
  }
  bool at_closing_tag() const { return end_ - p_ >= 2 && p_[0] == '<' && p_[1] == '/'; }
  void parse_closing_tag(const Element& element) {
    expect('<');
    expect('/');
    const char* begin = p_;
    while (is_name_char(peek())) advance();
    if (element.name().compare(0, std::string::npos, begin, static_cast<size_t>(p_ - begin)) != 0)
      fail("mismatched closing tag");
    expect('>');
  }
  void parse_content(Element& element) {
    skip_space();
    if (peek() != '<') {
      element.set_text(read_until('<'));
      return;
    }
    while (!at_closing_tag()) element.add_child(parse_element());
  }
  std::unique_ptr<Element> parse_element() {
    expect('<');
    ++g_new_calls;
    std::unique_ptr<Element> element(new Element(read_name()));
    parse_attributes(*element);
    expect('>');
    parse_content(*element);
    parse_closing_tag(*element);
    return element;
  }

  const char* p_;
  const char* end_;
};

// --- queries ----------------------------------------------------------------------------

struct Summary {
  uint64_t elements = 0, attributes = 0, text_bytes = 0, checksum = 0;
};

void summarise(const Element& e, Summary& s) {
  ++s.elements;
  s.attributes += e.attributes().size();
  s.text_bytes += e.text().size();
  if (const std::string* id = e.attribute("identifier")) s.checksum += static_cast<unsigned char>((*id)[0]);
  for (const auto& child : e.children()) summarise(*child, s);
}

long vm_hwm_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  long elements = argc > 1 ? std::atol(argv[1]) : 150000;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  std::string document = generate_document(elements);
  uint64_t setup_calls = g_new_calls;
  Summary total;
  for (int r = 0; r < rounds; ++r) {
    Parser parser(document);
    std::unique_ptr<Element> root = parser.parse_document();
    Summary s;
    summarise(*root, s);
    total.elements += s.elements;
    total.attributes += s.attributes;
    total.text_bytes += s.text_bytes;
    total.checksum += s.checksum;
  }
  long hwm = vm_hwm_kb();
  std::fprintf(stderr,
               "checksum=%llu program_new_calls=%llu [elements=%llu attributes=%llu text_bytes=%llu "
               "document_bytes=%zu] VmHWM_kB=%ld\n",
               static_cast<unsigned long long>(total.checksum),
               static_cast<unsigned long long>(g_new_calls - setup_calls),
               static_cast<unsigned long long>(total.elements), static_cast<unsigned long long>(total.attributes),
               static_cast<unsigned long long>(total.text_bytes), document.size(), hwm);
  return 0;
}
