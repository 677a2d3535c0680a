#include "got_patch.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "spinlock.hpp"

namespace heaptype {
namespace runtime {
namespace {

// dlopen is in the release group: a library loaded later gets the release entries
// (it may free the blocks of others), and the allocation ones while attached.
const char* const kReleaseNames[] = {
    "free", "realloc", "reallocarray", "malloc_usable_size", "dlopen",
    "_ZdlPv", "_ZdaPv", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t", "_ZdlPvm", "_ZdaPvm",
    "_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t", "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t", nullptr};

const char* const kAllocateNames[] = {
    "malloc", "calloc", "memalign", "aligned_alloc", "posix_memalign", "valloc", "pvalloc",
    "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t", nullptr};

constexpr size_t kMaxHooks = 24;
constexpr size_t kMaxSaved = 8192;

struct Hook {
  const char* name;
  uintptr_t ours;
};

struct SavedSlot {
  uintptr_t* slot;
  uintptr_t original;
  bool relro;
};

// The allocation slots written, for restore_allocation_hooks(). Static storage: the
// runtime allocates nothing through the tracked path.
SavedSlot g_saved[kMaxSaved];
size_t g_saved_count = 0;
SpinLock g_lock;  // two threads' dlopen() patch at once; detach restores

struct PatchJob {
  Hook hooks[kMaxHooks];
  size_t hook_count;
  uintptr_t self_base;  // the runtime's own module: its slots stay glibc's
  bool save;
  size_t written;
};

struct DynamicInfo {
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  size_t string_size = 0;
  const ElfW(Rela)* plt = nullptr;
  size_t plt_size = 0;
  const ElfW(Rela)* rela = nullptr;
  size_t rela_size = 0;
};

// ld.so relocates most d_ptr values in place; a few modules (the vDSO) keep them
// relative to their base.
uintptr_t dynamic_address(uintptr_t value, uintptr_t base) { return value < base ? value + base : value; }

DynamicInfo read_dynamic(const ElfW(Dyn)* dyn, uintptr_t base) {
  DynamicInfo info;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    uintptr_t ptr = dynamic_address(dyn->d_un.d_ptr, base);
    switch (dyn->d_tag) {
      case DT_SYMTAB: info.symbols = reinterpret_cast<const ElfW(Sym)*>(ptr); break;
      case DT_STRTAB: info.strings = reinterpret_cast<const char*>(ptr); break;
      case DT_STRSZ: info.string_size = dyn->d_un.d_val; break;
      case DT_JMPREL: info.plt = reinterpret_cast<const ElfW(Rela)*>(ptr); break;
      case DT_PLTRELSZ: info.plt_size = dyn->d_un.d_val; break;
      case DT_RELA: info.rela = reinterpret_cast<const ElfW(Rela)*>(ptr); break;
      case DT_RELASZ: info.rela_size = dyn->d_un.d_val; break;
      default: break;
    }
  }
  return info;
}

bool in_relro(const dl_phdr_info* object, uintptr_t address) {
  for (int i = 0; i < object->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = object->dlpi_phdr[i];
    uintptr_t start = object->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_GNU_RELRO && address >= start && address < start + ph.p_memsz) return true;
  }
  return false;
}

// One aligned word store: a thread calling through the slot meanwhile sees the old
// function or the new one, never half of each.
void write_slot(uintptr_t* slot, uintptr_t value, bool relro) {
  uintptr_t page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(slot) & ~(page_size - 1));
  if (relro && mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0) return;
  __atomic_store_n(slot, value, __ATOMIC_RELEASE);
  if (relro) mprotect(page, page_size, PROT_READ);
}

const Hook* hook_named(const PatchJob& job, const char* name) {
  for (size_t i = 0; i < job.hook_count; ++i)
    if (std::strcmp(job.hooks[i].name, name) == 0) return &job.hooks[i];
  return nullptr;
}

void patch_relocations(PatchJob& job, const dl_phdr_info* object, const DynamicInfo& info,
                       const ElfW(Rela)* relocations, size_t size) {
  if (!relocations || !info.symbols || !info.strings) return;
  for (size_t i = 0; i < size / sizeof(ElfW(Rela)); ++i) {
    const ElfW(Rela)& r = relocations[i];
    unsigned type = ELF64_R_TYPE(r.r_info);
    if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
    size_t name_offset = info.symbols[ELF64_R_SYM(r.r_info)].st_name;
    if (info.string_size && name_offset >= info.string_size) continue;
    const Hook* hook = hook_named(job, info.strings + name_offset);
    if (!hook) continue;
    uintptr_t* slot = reinterpret_cast<uintptr_t*>(object->dlpi_addr + r.r_offset);
    if (*slot == hook->ours) continue;
    bool relro = in_relro(object, reinterpret_cast<uintptr_t>(slot));
    if (job.save) {
      if (g_saved_count == kMaxSaved) continue;  // could not give it back: leave it glibc's
      g_saved[g_saved_count++] = {slot, *slot, relro};
    }
    write_slot(slot, hook->ours, relro);
    ++job.written;
  }
}

int patch_object(dl_phdr_info* object, size_t, void* data) {
  PatchJob& job = *static_cast<PatchJob*>(data);
  if (object->dlpi_addr == job.self_base || std::strstr(object->dlpi_name, "linux-vdso")) return 0;
  for (int i = 0; i < object->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = object->dlpi_phdr[i];
    if (ph.p_type != PT_DYNAMIC) continue;
    const ElfW(Dyn)* dyn = reinterpret_cast<const ElfW(Dyn)*>(object->dlpi_addr + ph.p_vaddr);
    DynamicInfo info = read_dynamic(dyn, object->dlpi_addr);
    patch_relocations(job, object, info, info.plt, info.plt_size);
    patch_relocations(job, object, info, info.rela, info.rela_size);
  }
  return 0;
}

}  // namespace

size_t patch_hooks(void* self, HookGroup group) {
  LockGuard guard(g_lock);
  PatchJob job;
  std::memset(&job, 0, sizeof job);
  Dl_info here;
  if (!dladdr(reinterpret_cast<void*>(&patch_hooks), &here)) return 0;
  job.self_base = reinterpret_cast<uintptr_t>(here.dli_fbase);
  job.save = group == HookGroup::kAllocate;
  for (const char* const* name = group == HookGroup::kAllocate ? kAllocateNames : kReleaseNames; *name; ++name) {
    // The runtime's definition, not the first in the global scope; its dlopen has
    // another name, so that preloading the runtime leaves dlopen alone.
    void* ours = dlsym(self, std::strcmp(*name, "dlopen") == 0 ? "heaptype_dlopen_patched" : *name);
    if (ours && job.hook_count < kMaxHooks) job.hooks[job.hook_count++] = {*name, reinterpret_cast<uintptr_t>(ours)};
  }
  dl_iterate_phdr(patch_object, &job);
  return job.written;
}

void restore_allocation_hooks() {
  LockGuard guard(g_lock);
  for (size_t i = 0; i < g_saved_count; ++i) write_slot(g_saved[i].slot, g_saved[i].original, g_saved[i].relro);
  g_saved_count = 0;
}

}  // namespace runtime
}  // namespace heaptype
