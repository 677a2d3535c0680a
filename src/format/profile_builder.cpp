#include "profile_builder.hpp"

#include <stdexcept>

namespace heaptype {
namespace format {

ProfileBuilder::ProfileBuilder(uint64_t clock_tick_ns, bool addresses, uint64_t pid) {
  std::memcpy(header_.magic, kFileMagic, sizeof kFileMagic);
  header_.version = kOldestVersion;  // its records are version 2's: the reader keeps reading them
  header_.header_size = sizeof(FileHeader);
  header_.pid = pid;
  header_.clock_tick_ns = clock_tick_ns;
  header_.pointer_size = sizeof(void*);
  header_.flags = addresses ? kFlagAddresses : 0;
}

void ProfileBuilder::chunk(ChunkKind kind, uint32_t thread, const std::string& payload) {
  raw_chunk(static_cast<uint8_t>(kind), thread, payload);
}

void ProfileBuilder::raw_chunk(uint8_t kind, uint32_t thread, const std::string& payload) {
  ChunkHeader h;
  std::memset(&h, 0, sizeof h);
  h.magic = kChunkMagic;
  h.kind = kind;
  h.thread = thread;
  h.payload_size = static_cast<uint32_t>(payload.size());
  body_.append(reinterpret_cast<const char*>(&h), sizeof h);
  body_ += payload;
}

void ProfileBuilder::program(const std::string& executable, const std::vector<std::string>& argv) {
  std::string payload = executable;
  for (const std::string& arg : argv) {
    payload.push_back('\0');
    payload += arg;
  }
  chunk(ChunkKind::kProgram, 0, payload);
}

void ProfileBuilder::modules(const std::string& text) { chunk(ChunkKind::kModules, 0, text); }

void ProfileBuilder::thread(uint32_t thread, uint64_t os_tid, const std::string& name) {
  uint8_t buf[kMaxVarint];
  std::string payload(reinterpret_cast<const char*>(buf), static_cast<size_t>(put_varint(buf, os_tid) - buf));
  chunk(ChunkKind::kThread, thread, payload + name);
}

void ProfileBuilder::put(uint32_t thread, std::initializer_list<uint64_t> values) {
  uint8_t buf[kMaxVarint];
  std::string& out = stream(thread).pending;
  for (uint64_t v : values) out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(put_varint(buf, v) - buf));
}

void ProfileBuilder::at(uint32_t thread, uint64_t time) {
  Stream& s = stream(thread);
  if (time < s.time) throw std::invalid_argument("time goes back in thread " + std::to_string(thread));
  if (time == s.time) return;
  put(thread, {control_record_head(ControlOp::kTime), time - s.time});
  s.time = time;
}

void ProfileBuilder::address(uint32_t thread, uint64_t address) {
  if (header_.flags & kFlagAddresses) put(thread, {encode_address_delta(address, stream(thread).last_address)});
}

uint32_t ProfileBuilder::site(uint32_t thread, uint64_t size, uint64_t count, uint64_t type_tag,
                              uint64_t call_site, uint64_t node) {
  put(thread, {control_record_head(ControlOp::kSite), size, count, type_tag, call_site, node});
  return stream(thread).sites++;
}

uint32_t ProfileBuilder::derived_site(uint32_t thread, uint32_t base_thread, uint32_t base_site,
                                      uint64_t type_tag, uint64_t count) {
  put(thread, {control_record_head(ControlOp::kDerivedSite), base_thread, base_site, type_tag, count});
  return stream(thread).sites++;
}

uint32_t ProfileBuilder::node(uint32_t thread, uint64_t parent, uint64_t function, uint64_t call_site) {
  put(thread, {control_record_head(ControlOp::kNode), parent, function, call_site});
  return static_cast<uint32_t>(stream(thread).nodes++);
}

void ProfileBuilder::alloc(uint32_t thread, uint64_t time, uint32_t site, uint64_t addr) {
  at(thread, time);
  put(thread, {alloc_record_head(site)});
  address(thread, addr);
  stream(thread).last_address = addr;
}

void ProfileBuilder::free(uint32_t thread, uint64_t time, uint32_t site, uint64_t addr) {
  at(thread, time);
  put(thread, {free_record_head(site)});
  address(thread, addr);
}

void ProfileBuilder::free_last(uint32_t thread, uint64_t time) {
  at(thread, time);
  put(thread, {control_record_head(ControlOp::kFreeLast)});
}

void ProfileBuilder::free_remote(uint32_t thread, uint64_t time, uint32_t owner_thread, uint32_t site,
                                 uint64_t addr) {
  at(thread, time);
  put(thread, {control_record_head(ControlOp::kFreeRemote), owner_thread, site});
  address(thread, addr);
}

void ProfileBuilder::move(uint32_t thread, uint64_t time, uint32_t owner_thread, uint32_t site,
                          uint32_t new_site, uint64_t addr) {
  at(thread, time);
  put(thread, {control_record_head(ControlOp::kMove), owner_thread, site, new_site});
  address(thread, addr);
}

void ProfileBuilder::finding(uint32_t thread, uint64_t time, uint64_t kind, uint32_t owner_thread, uint32_t site,
                             uint64_t a, uint64_t b, uint64_t call_site, uint64_t node) {
  at(thread, time);
  put(thread, {control_record_head(ControlOp::kFinding), kind, owner_thread, site, a, b, call_site, node});
}

void ProfileBuilder::stack(uint32_t thread, uint64_t time, uint64_t bytes) {
  at(thread, time);
  put(thread, {control_record_head(ControlOp::kStack), bytes});
}

void ProfileBuilder::flush(uint32_t thread) {
  Stream& s = stream(thread);
  if (s.pending.empty()) return;
  chunk(ChunkKind::kEvents, thread, s.pending);
  s.pending.clear();
}

void ProfileBuilder::end(uint64_t allocations, uint64_t frees, uint64_t untracked_frees, uint64_t buffer_bytes,
                         uint64_t registry_bytes) {
  for (auto& entry : streams_) flush(entry.first);
  uint8_t buf[5 * kMaxVarint];
  uint8_t* p = buf;
  for (uint64_t v : {allocations, frees, untracked_frees, buffer_bytes, registry_bytes}) p = put_varint(p, v);
  chunk(ChunkKind::kEnd, 0, std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(p - buf)));
}

std::string ProfileBuilder::finish() {
  for (auto& entry : streams_) flush(entry.first);
  std::string out(reinterpret_cast<const char*>(&header_), sizeof header_);
  return out + body_;
}

}  // namespace format
}  // namespace heaptype
