// pprof.cpp: pprof's profile.proto and gperftools' legacy heap profile text.
#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <map>
#include <string>
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

// One profile message from one or several processes of one program. Each process's
// code addresses are moved into the address space of the first process that mapped
// the same module (path, build id, file offset), as pprof's own merge does, so one
// function of the program has one location whatever each process's load address.
class ProtoBuilder {
 public:
  ProtoBuilder() { s(""); }

  // The samples that follow are `a`'s, its addresses mapped by `info.mappings`.
  void begin_process(const Analysis& a, const PprofInfo& info, const std::string& process) {
    a_ = &a;
    process_ = process;
    relocations_.clear();
    process_functions_.clear();
    for (const ExportMapping& m : info.mappings) relocations_.push_back({m, merged_mapping(m).start - m.start});
    if (comment_.empty()) comment_ = info.comment;
    if (info.time_unix_ns && (!time_unix_ns_ || info.time_unix_ns < time_unix_ns_)) time_unix_ns_ = info.time_unix_ns;
    duration_ns_ = std::max<uint64_t>(duration_ns_, a.totals().duration * a.clock_tick_ns());
  }

  void set_comment(const std::string& comment) { comment_ = comment; }

  void add(const Sample& sample) {
    const Analysis& a = *a_;
    std::vector<const PathFrame*> frames = a.call_paths().frames(a.contexts()[sample.context].path);
    // Leaf first; frames at one pc (a function and what is inlined into it) share a location.
    std::vector<uint64_t> location_ids;
    for (const auto& group : frames_by_pc(frames)) location_ids.push_back(location(group));
    const Figures& f = sample.figures;
    std::string body;
    packed_field(&body, 1, location_ids);
    packed_field(&body, 2, {f.allocations, f.bytes, static_cast<uint64_t>(f.live_blocks), static_cast<uint64_t>(f.live_bytes)});
    const TypeGroup& type = a.types()[sample.type_group];
    label(&body, "type", a.strings().get(type.name ? type.name : type.label));
    if (type.inferred) label(&body, "inferred", "true");
    std::string thread;
    varint_field(&thread, 1, s("thread"));
    varint_field(&thread, 3, a.contexts()[sample.context].thread);
    bytes_field(&body, 3, thread);
    if (!process_.empty()) label(&body, "process", process_);
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
    for (size_t i = 0; i < mappings_.size(); ++i) {
      const ExportMapping& m = mappings_[i];
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
    uint64_t comment = s(comment_);
    uint64_t default_type = s("alloc_space");
    uint64_t duration_ns = duration_ns_;
    for (const std::string* text : strings_) bytes_field(&out, 6, *text);  // every index is known by now
    varint_field(&out, 9, time_unix_ns_);
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

  struct Relocation {
    ExportMapping mapping;  // the process's own
    uint64_t delta;         // added to its addresses (modulo 2^64)
  };

  static bool same_module(const ExportMapping& x, const ExportMapping& y) {
    return x.path == y.path && x.build_id == y.build_id && x.offset == y.offset && x.limit - x.start == y.limit - y.start;
  }

  // The merged mapping of a process's mapping: the first process's one of the same
  // module, or this one, added; moved past the others if its range is taken.
  const ExportMapping& merged_mapping(const ExportMapping& m) {
    for (const ExportMapping& known : mappings_)
      if (same_module(known, m)) return known;
    ExportMapping placed = m;
    uint64_t end = 0;
    bool overlaps = false;
    for (const ExportMapping& known : mappings_) {
      overlaps = overlaps || (known.start < m.limit && m.start < known.limit);
      end = std::max(end, known.limit);
    }
    if (overlaps) {
      uint64_t page_aligned = (end + 0xfff) & ~uint64_t{0xfff};
      placed.start = page_aligned + (m.start & 0xfff);
      placed.limit = placed.start + (m.limit - m.start);
    }
    mappings_.push_back(placed);
    return mappings_.back();
  }

  // A process's code address in the merged address space.
  uint64_t relocated(uint64_t address) const {
    for (const Relocation& r : relocations_)
      if (r.mapping.start <= address && address < r.mapping.limit) return address + r.delta;
    return address;
  }

  uint64_t mapping_of(uint64_t address) const {
    for (size_t i = 0; i < mappings_.size(); ++i)
      if (mappings_[i].start <= address && address < mappings_[i].limit) return i + 1;
    return 0;
  }

  // Functions are keyed by their text, so the same function of two processes is one;
  // the current process's (name, file) string ids are remembered, so text is hashed
  // once per function and process.
  uint64_t function(uint32_t name, uint32_t file) {
    uint64_t own_key = (static_cast<uint64_t>(name) << 32) | file;
    auto own = process_functions_.find(own_key);
    if (own != process_functions_.end()) return own->second;
    uint64_t name_id = s(a_->strings().get(name)), file_id = s(a_->strings().get(file));
    uint64_t key = (name_id << 32) | file_id;
    auto it = function_ids_.find(key);
    if (it != function_ids_.end()) return process_functions_[own_key] = it->second;
    uint64_t id = functions_.size() + 1;
    std::string body;
    varint_field(&body, 1, id);
    varint_field(&body, 2, name_id);
    varint_field(&body, 3, name_id);
    varint_field(&body, 4, file_id);
    functions_.push_back(std::move(body));
    function_ids_.emplace(key, id);
    process_functions_.emplace(own_key, id);
    return id;
  }

  uint64_t location(const std::vector<const PathFrame*>& frames) {
    // Keyed by the merged address and function ids: the same code of two processes
    // is one location (location_key holds one analysis's own pc and string ids).
    uint64_t pc = relocated(frames[0]->pc);
    std::string key(reinterpret_cast<const char*>(&pc), sizeof pc);
    for (const PathFrame* f : frames) {
      uint64_t parts[2] = {function(f->name, f->file), f->line};
      key.append(reinterpret_cast<const char*>(parts), sizeof parts);
    }
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

  const Analysis* a_ = nullptr;
  std::string process_;
  std::vector<Relocation> relocations_;
  std::deque<ExportMapping> mappings_;  // deque: merged_mapping hands out references
  std::string comment_;
  uint64_t time_unix_ns_ = 0, duration_ns_ = 0;
  std::unordered_map<std::string, uint64_t> string_ids_;
  std::vector<const std::string*> strings_;
  std::unordered_map<uint64_t, uint64_t> function_ids_;      // by merged (name, file) string ids
  std::unordered_map<uint64_t, uint64_t> process_functions_;  // by the current analysis's string ids
  std::vector<std::string> functions_;
  std::unordered_map<std::string, uint64_t> location_ids_;
  std::vector<std::string> locations_;
  std::vector<std::string> samples_;
  bool any_lines_ = false;
};

}  // namespace

std::string pprof_proto(const Analysis& analysis, const PprofInfo& info) {
  ProtoBuilder builder;
  builder.begin_process(analysis, info, "");
  for (const Sample& sample : collect_samples(analysis)) builder.add(sample);
  return builder.encode();
}

std::string pprof_proto_merged(const std::vector<PprofProcess>& processes, const std::string& comment) {
  ProtoBuilder builder;
  for (const PprofProcess& p : processes) {
    builder.begin_process(*p.analysis, p.info, p.name);
    for (const Sample& sample : collect_samples(*p.analysis)) builder.add(sample);
  }
  builder.set_comment(comment);
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
