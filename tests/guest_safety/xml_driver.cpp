// A real-program workload for the guest-safety suite: TinyXML-2 (9.0.0, unmodified),
// which placement-news every node and attribute into 4 KiB memory pools (MemPoolT).
//
//   xml_driver SEED SIZE_KIB DIR
//
// 1. generates an XML document of about SIZE_KIB KiB (small elements, attributes,
//    text with entities, comments, CDATA), deterministic from SEED, into DIR/input.xml;
// 2. loads it with TinyXML-2, walks it and prints a summary and a checksum;
// 3. modifies it (deletes subtrees and attributes, inserts elements, text and comments:
//    more pool traffic), walks it again;
// 4. prints it back (XMLPrinter) and saves it to DIR/output.xml, deep-copies it into a
//    second document, reloads output.xml and checks both against the modified one;
// 5. returns from main, so that every document's destructor runs (their pools are
//    freed there: where the runtime's corruption of pooled objects showed).
//
// Everything printed and written depends on SEED and SIZE_KIB only: the random numbers
// come from splitmix64 (not <random>'s distributions, which differ between libstdc++
// and libc++), so g++ and Clang/libc++ builds print the same bytes.

#include "tinyxml2.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using tinyxml2::XMLAttribute;
using tinyxml2::XMLComment;
using tinyxml2::XMLDocument;
using tinyxml2::XMLElement;
using tinyxml2::XMLNode;
using tinyxml2::XMLPrinter;
using tinyxml2::XMLText;

struct Random {
  uint64_t state;
  uint64_t next() {  // splitmix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  unsigned below(unsigned n) { return static_cast<unsigned>(next() % n); }
};

struct Fnv1a {
  uint64_t hash = 0xcbf29ce484222325ull;
  void add(const char* text) {
    for (const char* c = text ? text : ""; *c; ++c) mix(static_cast<unsigned char>(*c));
    mix(0);  // a separator: "ab"+"c" differs from "a"+"bc"
  }
  void add(const char* text, size_t size) {
    for (size_t i = 0; i < size; ++i) mix(static_cast<unsigned char>(text[i]));
  }
  void mix(unsigned char byte) { hash = (hash ^ byte) * 0x100000001b3ull; }
};

const char* const kNames[] = {"item", "entry", "node", "row", "cell", "record", "field", "note", "ref", "x"};
const char* const kKeys[] = {"id", "type", "name", "value", "lang", "ref", "kind", "v"};
const char* const kWords[] = {"alpha", "beta", "gamma", "delta", "pool", "node", "text", "a&b", "x<y", "\"q\"",
                              "caf\xc3\xa9", "42", "-7", "3.25", "  spaced  "};

template <class T, size_t N>
const T& pick(Random& random, const T (&table)[N]) {
  return table[random.below(N)];
}

std::string escaped(const char* text) {
  std::string out;
  for (const char* c = text; *c; ++c) {
    switch (*c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += *c;
    }
  }
  return out;
}

// --- 1. the document ------------------------------------------------------------------------

void generate_element(Random& random, int depth, std::string& out) {
  const char* name = pick(random, kNames);
  out += '<';
  out += name;
  for (unsigned i = 0, n = random.below(4); i < n; ++i) {
    char key[24];
    std::snprintf(key, sizeof key, "%s%u", pick(random, kKeys), i);
    out += ' ';
    out += key;
    out += "=\"";
    out += escaped(pick(random, kWords));
    out += '"';
  }
  unsigned shape = random.below(10);
  if (shape == 0) {
    out += "/>";
    return;
  }
  out += '>';
  if (shape == 1) {
    out += "<!-- ";
    out += pick(random, kNames);
    out += " -->";
  } else if (shape == 2) {
    out += "<![CDATA[";
    out += pick(random, kWords);
    out += "]]>";
  } else if (depth < 5 && shape < 6) {
    for (unsigned i = 0, n = 1 + random.below(4); i < n; ++i) generate_element(random, depth + 1, out);
  } else {
    out += escaped(pick(random, kWords));
  }
  out += "</";
  out += name;
  out += '>';
}

std::string generate_document(uint64_t seed, size_t size) {
  Random random{seed};
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<document seed=\"" + std::to_string(seed) + "\">\n";
  while (out.size() < size) {
    generate_element(random, 0, out);
    out += '\n';
  }
  out += "</document>\n";
  return out;
}

// --- 2. walking ------------------------------------------------------------------------------

struct Summary {
  unsigned long elements = 0, attributes = 0, texts = 0, cdata = 0, comments = 0;
  Fnv1a checksum;
};

// TinyXML-2's own traversal (XMLNode::Accept) with a visitor that counts and hashes.
class Walker : public tinyxml2::XMLVisitor {
 public:
  Summary summary;
  bool VisitEnter(const XMLElement& element, const XMLAttribute* attribute) override {
    ++summary.elements;
    summary.checksum.add(element.Name());
    for (; attribute; attribute = attribute->Next()) {
      ++summary.attributes;
      summary.checksum.add(attribute->Name());
      summary.checksum.add(attribute->Value());
    }
    return true;
  }
  bool VisitExit(const XMLElement&) override {
    summary.checksum.add("/");
    return true;
  }
  bool Visit(const XMLText& text) override {
    ++(text.CData() ? summary.cdata : summary.texts);
    summary.checksum.add(text.Value());
    return true;
  }
  bool Visit(const XMLComment& comment) override {
    ++summary.comments;
    summary.checksum.add(comment.Value());
    return true;
  }
};

Summary walk(const XMLDocument& document) {
  Walker walker;
  document.Accept(&walker);
  return walker.summary;
}

void print_summary(const char* what, const Summary& s) {
  std::printf("%s: elements=%lu attributes=%lu texts=%lu cdata=%lu comments=%lu checksum=%016llx\n", what,
              s.elements, s.attributes, s.texts, s.cdata, s.comments,
              static_cast<unsigned long long>(s.checksum.hash));
}

// --- 3. changes ------------------------------------------------------------------------------

void elements_in_order(XMLElement* element, std::vector<XMLElement*>& out) {
  for (; element; element = element->NextSiblingElement()) {
    out.push_back(element);
    elements_in_order(element->FirstChildElement(), out);
  }
}

XMLElement* new_record(XMLDocument& document, Random& random) {
  XMLElement* element = document.NewElement(pick(random, kNames));
  element->SetAttribute("added", static_cast<int>(random.below(100000)));
  element->SetAttribute("weight", random.below(1000) / 8.0);
  element->InsertEndChild(document.NewText(pick(random, kWords)));
  return element;
}

// Elements are changed last to first in document order, so a subtree deleted under
// one element holds only elements already visited: no pointer in `all` is used after
// its node went back to the pool.
unsigned long change(XMLDocument& document, uint64_t seed) {
  Random random{seed ^ 0x5eed};
  std::vector<XMLElement*> all;
  elements_in_order(document.RootElement(), all);
  unsigned long changes = 0;
  for (size_t i = all.size(); i-- > 1;) {  // the root element stays
    XMLElement* element = all[i];
    switch (random.below(8)) {
      case 0:  // a subtree back to the pools
        if (XMLNode* child = element->FirstChild()) {
          element->DeleteChild(child);
          ++changes;
        }
        break;
      case 1:
        element->InsertEndChild(new_record(document, random));
        ++changes;
        break;
      case 2:
        element->InsertFirstChild(document.NewComment(pick(random, kWords)));
        ++changes;
        break;
      case 3:  // an attribute back to its pool, another from it
        if (const XMLAttribute* first = element->FirstAttribute()) {
          element->DeleteAttribute(first->Name());
          ++changes;
        }
        element->SetAttribute("changed", static_cast<unsigned>(i));
        break;
      case 4:
        element->Parent()->InsertAfterChild(element, new_record(document, random));  // not the root: a parent
        ++changes;
        break;
      default:
        break;
    }
  }
  return changes;
}

// --- 4. printing and copies -----------------------------------------------------------------

std::string hex(uint64_t value) {
  char text[20];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

bool write_file(const std::string& path, const std::string& text) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) return false;
  bool whole = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  return std::fclose(file) == 0 && whole;
}

int fail(const char* what, const XMLDocument& document) {
  std::printf("error: %s: %s\n", what, document.ErrorStr());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s SEED SIZE_KIB DIR\n", argv[0]);
    return 2;
  }
  const uint64_t seed = std::strtoull(argv[1], nullptr, 10);
  const size_t size = std::strtoull(argv[2], nullptr, 10) * 1024;
  const std::string dir = argv[3];
  const std::string input = dir + "/input.xml", output = dir + "/output.xml";

  {
    std::string text = generate_document(seed, size);
    if (!write_file(input, text)) return std::printf("error: cannot write %s\n", input.c_str()), 1;
    Fnv1a digest;
    digest.add(text.data(), text.size());
    std::printf("generated: bytes=%zu fnv=%s\n", text.size(), hex(digest.hash).c_str());
  }

  XMLDocument document;
  if (document.LoadFile(input.c_str()) != tinyxml2::XML_SUCCESS) return fail("load input.xml", document);
  print_summary("parsed", walk(document));

  std::printf("changes: %lu\n", change(document, seed));
  const Summary changed = walk(document);
  print_summary("changed", changed);

  XMLPrinter printer;
  document.Print(&printer);
  Fnv1a printed;
  printed.add(printer.CStr(), static_cast<size_t>(printer.CStrSize() - 1));  // CStrSize counts the NUL
  std::printf("printed: bytes=%d fnv=%s\n", printer.CStrSize() - 1, hex(printed.hash).c_str());
  if (document.SaveFile(output.c_str()) != tinyxml2::XML_SUCCESS) return fail("save output.xml", document);

  XMLDocument copy;
  document.DeepCopy(&copy);
  const Summary copied = walk(copy);
  std::printf("deep copy: %s\n", copied.checksum.hash == changed.checksum.hash ? "same" : "DIFFERENT");

  XMLDocument reloaded;
  if (reloaded.LoadFile(output.c_str()) != tinyxml2::XML_SUCCESS) return fail("reload output.xml", reloaded);
  const Summary again = walk(reloaded);
  std::printf("reloaded: %s\n", again.checksum.hash == changed.checksum.hash ? "same" : "DIFFERENT");
  copy.Clear();  // one pool emptied before the destructors empty the others
  std::printf("done\n");
  return 0;
}
