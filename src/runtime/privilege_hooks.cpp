// privilege_hooks.cpp: the calls a process gives up its rights with, replaced so that a
// forked child's profile is created while the child still may.
//
// A forked child opens its profile with its first chunk (profile_writer.hpp,
// writer_open_later), so that a child that goes straight to exec() leaves no empty file.
// A server started as root forks its workers, and each drops to an unprivileged user
// (nginx's workers become nobody) or into a chroot before it allocates much: its profile
// could then not be created in the directory the master writes to, and the workers, where
// the server does its work, went unprofiled. Each function here first opens a profile
// still to be opened, then calls the C library's own.
#include <grp.h>
#include <sys/fsuid.h>
#include <unistd.h>

#include "libc_next.hpp"
#include "profile_writer.hpp"

namespace rt = heaptype::runtime;

namespace {

// Opens the profile while the process may, then calls the C library's `name`.
template <class Function, class... Args>
int open_then(Function* cached, const char* name, Args... args) {
  return rt::call_next_after(cached, name, rt::writer_open_while_allowed, args...);
}

using OneId = int (*)(unsigned);
using TwoIds = int (*)(unsigned, unsigned);
using ThreeIds = int (*)(unsigned, unsigned, unsigned);
using Groups = int (*)(size_t, const gid_t*);
using Path = int (*)(const char*);

OneId g_setuid, g_seteuid, g_setgid, g_setegid, g_setfsuid, g_setfsgid;
TwoIds g_setreuid, g_setregid;
ThreeIds g_setresuid, g_setresgid;
Groups g_setgroups;
Path g_chroot;

}  // namespace

HEAPTYPE_LIBC_EXPORT int setuid(uid_t uid) noexcept { return open_then(&g_setuid, "setuid", uid); }
HEAPTYPE_LIBC_EXPORT int seteuid(uid_t uid) noexcept { return open_then(&g_seteuid, "seteuid", uid); }
HEAPTYPE_LIBC_EXPORT int setreuid(uid_t r, uid_t e) noexcept { return open_then(&g_setreuid, "setreuid", r, e); }
HEAPTYPE_LIBC_EXPORT int setresuid(uid_t r, uid_t e, uid_t s) noexcept {
  return open_then(&g_setresuid, "setresuid", r, e, s);
}
HEAPTYPE_LIBC_EXPORT int setfsuid(uid_t uid) noexcept { return open_then(&g_setfsuid, "setfsuid", uid); }
HEAPTYPE_LIBC_EXPORT int setgid(gid_t gid) noexcept { return open_then(&g_setgid, "setgid", gid); }
HEAPTYPE_LIBC_EXPORT int setegid(gid_t gid) noexcept { return open_then(&g_setegid, "setegid", gid); }
HEAPTYPE_LIBC_EXPORT int setregid(gid_t r, gid_t e) noexcept { return open_then(&g_setregid, "setregid", r, e); }
HEAPTYPE_LIBC_EXPORT int setresgid(gid_t r, gid_t e, gid_t s) noexcept {
  return open_then(&g_setresgid, "setresgid", r, e, s);
}
HEAPTYPE_LIBC_EXPORT int setfsgid(gid_t gid) noexcept { return open_then(&g_setfsgid, "setfsgid", gid); }
HEAPTYPE_LIBC_EXPORT int setgroups(size_t count, const gid_t* groups) noexcept {
  return open_then(&g_setgroups, "setgroups", count, groups);
}
HEAPTYPE_LIBC_EXPORT int chroot(const char* path) noexcept { return open_then(&g_chroot, "chroot", path); }
