#include "attach.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "diagnostics.hpp"
#include "got_patch.hpp"
#include "module_names.hpp"
#include "profile_writer.hpp"
#include "tracker.hpp"

namespace heaptype {
namespace runtime {
namespace {

bool g_attached = false;
bool g_detached = false;
void* g_self = nullptr;  // this library's dlopen handle, kept open: never unloaded
char g_attach_output[4096];

// The file name of the module holding the runtime: the program itself when it is
// linked statically.
const char* runtime_module() {
  Dl_info here;
  return dladdr(reinterpret_cast<void*>(&runtime_module), &here) && here.dli_fname ? here.dli_fname : "";
}

// LD_PRELOAD names the runtime's file (by path or by name).
bool named_in_preload(const char* module) {
  const char* preload = getenv("LD_PRELOAD");
  const char* name = file_name_of(module);
  return preload && *name && std::strstr(preload, name) != nullptr;
}

}  // namespace

format::RuntimeMode entry_mode() {
  if (g_attached) return format::RuntimeMode::kAttached;
  return named_in_preload(runtime_module()) ? format::RuntimeMode::kPreloaded : format::RuntimeMode::kLinked;
}

const char* attach_output() { return g_attached ? g_attach_output : nullptr; }

}  // namespace runtime
}  // namespace heaptype

namespace rt = heaptype::runtime;

extern "C" {

// Called by `heaptype attach` (through gdb) after dlopen() of this library: starts
// recording into `output` and routes the process's allocations here. 1 on success.
__attribute__((visibility("default"))) int heaptype_attach(const char* output) {
  if (rt::g_state.load() != rt::kUninitialized) {
    rt::note("attach: the runtime is already running in this process (linked, preloaded, or attached "
             "before)");
    return 0;
  }
  if (!output || !*output || std::strlen(output) >= sizeof rt::g_attach_output) return 0;
  std::memcpy(rt::g_attach_output, output, std::strlen(output) + 1);
  rt::g_attached = true;
  if (rt::ensure_initialized() != rt::kActive) return 0;
  rt::g_self = dlopen(rt::runtime_module(), RTLD_NOW | RTLD_NOLOAD);
  if (!rt::g_self) return 0;
  // Every release entry first: once any allocation gets a header, whatever frees it
  // must be able to take the header off.
  rt::patch_hooks(rt::g_self, rt::HookGroup::kRelease);
  return rt::patch_hooks(rt::g_self, rt::HookGroup::kAllocate) ? 1 : 0;
}

// The attached process's dlopen: the new library's entries are patched as the others
// were (allocation entries only until the detach).
__attribute__((visibility("default"))) void* heaptype_dlopen_patched(const char* file, int mode) {
  static void* (*const real)(const char*, int) =
      reinterpret_cast<void* (*)(const char*, int)>(dlsym(RTLD_DEFAULT, "dlopen"));
  void* handle = real(file, mode);
  if (handle && rt::g_self) {
    rt::patch_hooks(rt::g_self, rt::HookGroup::kRelease);
    if (!rt::g_detached) rt::patch_hooks(rt::g_self, rt::HookGroup::kAllocate);
  }
  return handle;
}

// Called by `heaptype detach`: allocations go straight to glibc again, the profile
// is finished and closed. 1 on success.
__attribute__((visibility("default"))) int heaptype_detach(void) {
  if (!rt::g_attached || rt::g_detached || rt::g_state.load() != rt::kActive) return 0;
  rt::g_detached = true;
  rt::restore_allocation_hooks();
  rt::g_recording.store(false);
  rt::refresh_ordinary();
  rt::finish(false);
  rt::writer_close();
  return 1;
}

}  // extern "C"
