#include "runtime_imports.hpp"

#include <elf.h>
#include <link.h>

#include <atomic>
#include <cstring>

#include "attach.hpp"
#include "module_names.hpp"

namespace heaptype {
namespace runtime {

uintptr_t g_import_start_up_begin = 0;
uintptr_t g_import_start_up_end = 0;

namespace {

constexpr char kCxxLibrary[] = "libstdc++.so";

std::atomic<bool> g_runtime_constructed{false};
bool g_left_out = false;

// [begin, end) of an object's loaded segments; empty for an object without any.
struct Span {
  uintptr_t begin = 0, end = 0;
  bool contains(uintptr_t address) const { return address - begin < end - begin; }
};

Span loaded_span(const dl_phdr_info* info) {
  Span span{UINTPTR_MAX, 0};
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_LOAD) continue;
    uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    if (start < span.begin) span.begin = start;
    if (start + segment.p_memsz > span.end) span.end = start + segment.p_memsz;
  }
  return span.begin < span.end ? span : Span{};
}

bool names_cxx_library(const char* path) { return file_name_starts_with(path, kCxxLibrary); }

// The object's dynamic string table. glibc rewrites DT_STRTAB to its loaded address
// in a writable dynamic section and leaves it relative in a read-only one (the
// vDSO's): the one inside the object's mapping is it. nullptr when neither is.
const char* string_table(uintptr_t value, uintptr_t base, Span span) {
  if (span.contains(value)) return reinterpret_cast<const char*>(value);
  if (span.contains(value + base)) return reinterpret_cast<const char*>(value + base);
  return nullptr;
}

// Whether the object's DT_NEEDED entries name libstdc++.so; true also when they
// cannot be read (the block is then counted, as it always was).
bool needs_cxx_library(const dl_phdr_info* info, Span span) {
  const ElfW(Dyn)* dynamic = nullptr;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dynamic) return false;
  uintptr_t strings_at = 0;
  uint64_t strings_size = 0;
  bool needs_any = false;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_STRTAB) strings_at = d->d_un.d_ptr;
    if (d->d_tag == DT_STRSZ) strings_size = d->d_un.d_val;
    if (d->d_tag == DT_NEEDED) needs_any = true;
  }
  if (!needs_any) return false;
  const char* strings = string_table(strings_at, info->dlpi_addr, span);
  if (!strings || !strings_size) return true;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag != DT_NEEDED) continue;
    if (d->d_un.d_val >= strings_size || names_cxx_library(strings + d->d_un.d_val)) return true;
  }
  return false;
}

struct Scan {
  uintptr_t runtime_code = 0;  // an address in the runtime's own object
  Span cxx_library;
  bool needed_elsewhere = false;
};

int scan_object(dl_phdr_info* info, size_t, void* arg) {
  Scan* scan = static_cast<Scan*>(arg);
  Span span = loaded_span(info);
  if (span.contains(scan->runtime_code)) return 0;  // its needs are the runtime's
  if (info->dlpi_name && names_cxx_library(info->dlpi_name)) {
    scan->cxx_library = span;
    return 0;
  }
  if (needs_cxx_library(info, span)) scan->needed_elsewhere = true;
  return 0;
}

// The loader runs the runtime's constructors once libstdc++'s start-up is over: from
// here on, what libstdc++ allocates is the program's.
__attribute__((constructor)) void close_the_import_start_up() {
  g_runtime_constructed.store(true, std::memory_order_relaxed);
  g_import_start_up_begin = g_import_start_up_end = 0;
}

}  // namespace

void note_runtime_only_libraries() {
  if (g_runtime_constructed.load(std::memory_order_relaxed) || entry_mode() != format::RuntimeMode::kPreloaded)
    return;
  // dl_iterate_phdr allocates nothing; the loader's lock it takes is recursive (this
  // runs inside a library's constructor, under _dl_init).
  Scan scan;
  scan.runtime_code = reinterpret_cast<uintptr_t>(&note_runtime_only_libraries);
  dl_iterate_phdr(scan_object, &scan);
  if (scan.needed_elsewhere || !scan.cxx_library.end) return;
  g_import_start_up_begin = scan.cxx_library.begin;
  g_import_start_up_end = scan.cxx_library.end;
}

bool runtime_import_allocation(uintptr_t call_site) {
  if (call_site - g_import_start_up_begin >= g_import_start_up_end - g_import_start_up_begin) return false;
  g_left_out = true;
  return true;
}

bool runtime_import_allocations_left_out() { return g_left_out; }

}  // namespace runtime
}  // namespace heaptype
