// tinyxml2_walk.cpp: a driver for TinyXML-2 (tests/real_programs.py fetches its source):
// generates an XML document of about `argv[1]` MiB (default 4) in memory, parses it,
// walks every element and attribute, edits some, prints the document back and prints
// counts and a checksum. Deterministic: the same output on every run.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tinyxml2.h"

namespace {

// A document of records, each with attributes, text and nested items.
std::string make_document(size_t target_bytes) {
  std::string xml = "<?xml version=\"1.0\"?>\n<catalog>\n";
  unsigned seed = 12345;
  for (size_t record = 0; xml.size() < target_bytes; ++record) {
    seed = seed * 1103515245u + 12345u;
    xml += "<record id=\"" + std::to_string(record) + "\" kind=\"k" + std::to_string(seed % 7) + "\">";
    xml += "<name>entry &amp; number " + std::to_string(record) + "</name>";
    for (unsigned item = 0; item < 1 + seed % 5; ++item)
      xml += "<item n=\"" + std::to_string(item) + "\" v=\"" + std::to_string(seed % (97 + item)) + "\">" +
             std::string(1 + (seed >> (item + 3)) % 24, 'x') + "</item>";
    xml += "<!-- c --></record>\n";
  }
  return xml + "</catalog>\n";
}

struct Counts {
  unsigned long elements = 0, attributes = 0, texts = 0, checksum = 0;
};

void walk(const tinyxml2::XMLElement* element, Counts* counts) {
  for (; element; element = element->NextSiblingElement()) {
    ++counts->elements;
    for (const tinyxml2::XMLAttribute* a = element->FirstAttribute(); a; a = a->Next()) {
      ++counts->attributes;
      for (const char* c = a->Value(); *c; ++c) counts->checksum = counts->checksum * 31 + static_cast<unsigned char>(*c);
    }
    if (const char* text = element->GetText()) {
      ++counts->texts;
      counts->checksum += std::string(text).size();
    }
    walk(element->FirstChildElement(), counts);
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 4;
  std::string xml = make_document(mib << 20);
  tinyxml2::XMLDocument doc;
  if (doc.Parse(xml.c_str(), xml.size()) != tinyxml2::XML_SUCCESS) {
    std::fprintf(stderr, "parse error: %s\n", doc.ErrorStr());
    return 1;
  }
  Counts counts;
  walk(doc.RootElement(), &counts);
  // Edit: every third record gets a new attribute, every fifth loses its first item.
  unsigned long index = 0;
  for (tinyxml2::XMLElement* r = doc.RootElement()->FirstChildElement("record"); r;
       r = r->NextSiblingElement("record"), ++index) {
    if (index % 3 == 0) r->SetAttribute("seen", static_cast<unsigned>(index));
    if (index % 5 == 0) r->DeleteChild(r->FirstChildElement("item"));
  }
  tinyxml2::XMLPrinter printer;
  doc.Print(&printer);
  std::printf("bytes=%zu elements=%lu attributes=%lu texts=%lu checksum=%lu printed=%d\n", xml.size(),
              counts.elements, counts.attributes, counts.texts, counts.checksum, printer.CStrSize());
  return 0;
}
