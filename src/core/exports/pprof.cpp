// pprof.cpp: pprof's profile.proto and gperftools' legacy heap profile text.
#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "exports.hpp"
#include "samples.hpp"

namespace heaptype {
namespace core {
namespace {

// --- protobuf wire format (proto3: zero values are not written) -----------------------

void put_varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void varint_field(std::string* out, uint32_t number, uint64_t value) {
  if (!value) return;
  put_varint(out, static_cast<uint64_t>(number) << 3);
  put_varint(out, value);
}

void bytes_field(std::string* out, uint32_t number, const std::string& payload) {
  put_varint(out, (static_cast<uint64_t>(number) << 3) | 2);
  put_varint(out, payload.size());
  *out += payload;
}

void packed_field(std::string* out, uint32_t number, const std::vector<uint64_t>& values) {
  if (values.empty()) return;
  std::string body;
  for (uint64_t v : values) put_varint(&body, v);
  bytes_field(out, number, body);
}

class ProtoBuilder {
 public:
  ProtoBuilder(const Analysis& a, const PprofInfo& info) : a_(a), info_(info) { s(""); }

  void add(const Sample& sample) {
    std::vector<const PathFrame*> frames = a_.call_paths().frames(a_.contexts()[sample.context].path);
    // Leaf first; frames at one pc (a function and what is inlined into it) share a location.
    std::vector<uint64_t> location_ids;
    for (const auto& group : frames_by_pc(frames)) location_ids.push_back(location(group));
    const Figures& f = sample.figures;
    std::string body;
    packed_field(&body, 1, location_ids);
    packed_field(&body, 2, {f.allocations, f.bytes, static_cast<uint64_t>(f.live_blocks), static_cast<uint64_t>(f.live_bytes)});
    const TypeGroup& type = a_.types()[sample.type_group];
    label(&body, "type", a_.strings().get(type.name ? type.name : type.label));
    if (type.inferred) label(&body, "inferred", "true");
    std::string thread;
    varint_field(&thread, 1, s("thread"));
    varint_field(&thread, 3, a_.contexts()[sample.context].thread);
    bytes_field(&body, 3, thread);
    samples_.push_back(std::move(body));
  }

  std::string encode() {
    std::string out;
    for (const char* const* kind : {kAllocObjects, kAllocSpace, kInuseObjects, kInuseSpace}) {
      std::string type;
      varint_field(&type, 1, s(kind[0]));
      varint_field(&type, 2, s(kind[1]));
      bytes_field(&out, 1, type);
    }
    for (const std::string& body : samples_) bytes_field(&out, 2, body);
    for (size_t i = 0; i < info_.mappings.size(); ++i) {
      const ExportMapping& m = info_.mappings[i];
      std::string body;
      varint_field(&body, 1, i + 1);
      varint_field(&body, 2, m.start);
      varint_field(&body, 3, m.limit);
      varint_field(&body, 4, m.offset);
      varint_field(&body, 5, s(m.path));
      varint_field(&body, 6, s(m.build_id));
      varint_field(&body, 7, 1);
      varint_field(&body, 8, any_lines_ ? 1 : 0);
      varint_field(&body, 9, any_lines_ ? 1 : 0);
      varint_field(&body, 10, 1);
      bytes_field(&out, 3, body);
    }
    for (const std::string& body : locations_) bytes_field(&out, 4, body);
    for (const std::string& body : functions_) bytes_field(&out, 5, body);
    std::string period;
    varint_field(&period, 1, s("space"));
    varint_field(&period, 2, s("bytes"));
    uint64_t comment = s(info_.comment);
    uint64_t default_type = s("alloc_space");
    uint64_t duration_ns = a_.totals().duration * a_.clock_tick_ns();
    for (const std::string* text : strings_) bytes_field(&out, 6, *text);  // every index is known by now
    varint_field(&out, 9, info_.time_unix_ns);
    varint_field(&out, 10, duration_ns);
    bytes_field(&out, 11, period);
    varint_field(&out, 12, 1);
    varint_field(&out, 13, comment);
    varint_field(&out, 14, default_type);
    return out;
  }

 private:
  static constexpr const char* kAllocObjects[2] = {"alloc_objects", "count"};
  static constexpr const char* kAllocSpace[2] = {"alloc_space", "bytes"};
  static constexpr const char* kInuseObjects[2] = {"inuse_objects", "count"};
  static constexpr const char* kInuseSpace[2] = {"inuse_space", "bytes"};

  uint64_t s(const std::string& text) {
    auto it = string_ids_.find(text);
    if (it != string_ids_.end()) return it->second;
    uint64_t id = strings_.size();
    auto inserted = string_ids_.emplace(text, id).first;
    strings_.push_back(&inserted->first);
    return id;
  }

  void label(std::string* body, const std::string& key, const std::string& value) {
    std::string l;
    varint_field(&l, 1, s(key));
    varint_field(&l, 2, s(value));
    bytes_field(body, 3, l);
  }

  uint64_t mapping_of(uint64_t address) const {
    for (size_t i = 0; i < info_.mappings.size(); ++i)
      if (info_.mappings[i].start <= address && address < info_.mappings[i].limit) return i + 1;
    return 0;
  }

  uint64_t function(uint32_t name, uint32_t file) {
    uint64_t key = (static_cast<uint64_t>(name) << 32) | file;
    auto it = function_ids_.find(key);
    if (it != function_ids_.end()) return it->second;
    uint64_t id = functions_.size() + 1;
    std::string body;
    varint_field(&body, 1, id);
    varint_field(&body, 2, s(a_.strings().get(name)));
    varint_field(&body, 3, s(a_.strings().get(name)));
    varint_field(&body, 4, s(a_.strings().get(file)));
    functions_.push_back(std::move(body));
    function_ids_.emplace(key, id);
    return id;
  }

  uint64_t location(const std::vector<const PathFrame*>& frames) {
    std::string key = location_key(frames);
    uint64_t pc = frames[0]->pc;
    auto it = location_ids_.find(key);
    if (it != location_ids_.end()) return it->second;
    uint64_t id = locations_.size() + 1;
    std::string body;
    varint_field(&body, 1, id);
    varint_field(&body, 2, mapping_of(pc));
    varint_field(&body, 3, pc);
    for (const PathFrame* f : frames) {
      any_lines_ = any_lines_ || f->line;
      std::string line;
      varint_field(&line, 1, function(f->name, f->file));
      varint_field(&line, 2, f->line);
      bytes_field(&body, 4, line);
    }
    locations_.push_back(std::move(body));
    location_ids_.emplace(std::move(key), id);
    return id;
  }

  const Analysis& a_;
  const PprofInfo& info_;
  std::unordered_map<std::string, uint64_t> string_ids_;
  std::vector<const std::string*> strings_;
  std::unordered_map<uint64_t, uint64_t> function_ids_;
  std::vector<std::string> functions_;
  std::unordered_map<std::string, uint64_t> location_ids_;
  std::vector<std::string> locations_;
  std::vector<std::string> samples_;
  bool any_lines_ = false;
};

}  // namespace

std::string pprof_proto(const Analysis& analysis, const PprofInfo& info) {
  ProtoBuilder builder(analysis, info);
  for (const Sample& sample : collect_samples(analysis)) builder.add(sample);
  return builder.encode();
}

std::string pprof_text(const Analysis& analysis, const std::string& module_map) {
  std::map<std::vector<uint64_t>, std::array<uint64_t, 4>> stacks;
  for (const Sample& sample : collect_samples(analysis)) {
    std::vector<uint64_t> addresses =
        return_addresses(analysis.call_paths().frames(analysis.contexts()[sample.context].path));
    if (addresses.empty()) continue;
    std::array<uint64_t, 4>& v = stacks[addresses];
    const Figures& f = sample.figures;
    v[0] += f.live_blocks;
    v[1] += f.live_bytes;
    v[2] += f.allocations;
    v[3] += f.bytes;
  }
  std::array<uint64_t, 4> totals = {0, 0, 0, 0};
  std::vector<std::pair<const std::vector<uint64_t>*, const std::array<uint64_t, 4>*>> order;
  for (const auto& entry : stacks) {
    for (int i = 0; i < 4; ++i) totals[i] += entry.second[i];
    order.push_back({&entry.first, &entry.second});
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return (*x.second)[3] > (*y.second)[3]; });
  std::string out;
  char buf[160];
  auto counts = [&](const std::array<uint64_t, 4>& v) {
    snprintf(buf, sizeof buf, "%6" PRIu64 ": %8" PRIu64 " [%6" PRIu64 ": %8" PRIu64 "] @ ", v[0], v[1], v[2], v[3]);
    out += buf;
  };
  out += "heap profile: ";
  counts(totals);
  out += "heapprofile\n";
  for (const auto& entry : order) {
    counts(*entry.second);
    for (size_t i = 0; i < entry.first->size(); ++i) {
      snprintf(buf, sizeof buf, "%s0x%016" PRIx64, i ? " " : "", (*entry.first)[i]);
      out += buf;
    }
    out += "\n";
  }
  out += "\nMAPPED_LIBRARIES:\n";
  std::string modules = module_map;
  while (!modules.empty() && modules.back() == '\n') modules.pop_back();
  out += modules;
  out += "\n";
  return out;
}

}  // namespace core
}  // namespace heaptype
