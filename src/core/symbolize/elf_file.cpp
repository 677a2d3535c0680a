#include "elf_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "errors.hpp"

namespace heaptype {
namespace symbolize {
namespace {

constexpr Elf64_Word kGnuBuildIdNote = 3;  // NT_GNU_BUILD_ID

void init_libelf() {
  static const bool ready = elf_version(EV_CURRENT) != EV_NONE;
  (void)ready;
}

// The build id in one note-holding data block, "" when absent.
std::string build_id_in_notes(Elf_Data* data) {
  GElf_Nhdr header;
  size_t offset = 0, name_at = 0, desc_at = 0;
  while (data != nullptr && offset < data->d_size &&
         (offset = gelf_getnote(data, offset, &header, &name_at, &desc_at)) > 0) {
    const char* base = static_cast<const char*>(data->d_buf);
    if (header.n_type == kGnuBuildIdNote && header.n_namesz == 4 && std::memcmp(base + name_at, "GNU", 4) == 0)
      return to_hex(reinterpret_cast<const unsigned char*>(base + desc_at), header.n_descsz);
  }
  return "";
}

}  // namespace

std::string to_hex(const unsigned char* bytes, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(digits[bytes[i] >> 4]);
    out.push_back(digits[bytes[i] & 15]);
  }
  return out;
}

ElfFile::ElfFile(const std::string& path) : path_(path) {
  init_libelf();
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw SymbolError("cannot read " + path + ": " + std::strerror(errno));
  elf_ = elf_begin(fd_, ELF_C_READ_MMAP, nullptr);
  if (elf_ == nullptr || elf_kind(elf_) != ELF_K_ELF) {
    if (elf_ != nullptr) elf_end(elf_);
    close(fd_);
    throw NotElfError(path + " is not an ELF file");
  }
}

ElfFile::~ElfFile() {
  elf_end(elf_);
  close(fd_);
}

std::string ElfFile::build_id() const {
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn != nullptr; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_NOTE) continue;
    std::string id = build_id_in_notes(elf_getdata(scn, nullptr));
    if (!id.empty()) return id;
  }
  size_t count = 0;  // no section headers (a stripped-down file): the program's notes
  if (elf_getphdrnum(elf_, &count) != 0) return "";
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf_, static_cast<int>(i), &phdr) == nullptr || phdr.p_type != PT_NOTE) continue;
    std::string id = build_id_in_notes(elf_getdata_rawchunk(elf_, static_cast<int64_t>(phdr.p_offset),
                                                            phdr.p_filesz, ELF_T_NHDR));
    if (!id.empty()) return id;
  }
  return "";
}

std::vector<Segment> ElfFile::load_segments() const {
  std::vector<Segment> out;
  size_t count = 0;
  if (elf_getphdrnum(elf_, &count) == 0) {
    for (size_t i = 0; i < count; ++i) {
      GElf_Phdr phdr;
      if (gelf_getphdr(elf_, static_cast<int>(i), &phdr) != nullptr && phdr.p_type == PT_LOAD)
        out.push_back(Segment{phdr.p_vaddr, phdr.p_offset, phdr.p_memsz});
    }
  }
  if (out.empty()) throw SymbolError(path_ + " has no PT_LOAD segment: not a loadable module");
  std::sort(out.begin(), out.end(), [](const Segment& a, const Segment& b) { return a.vaddr < b.vaddr; });
  return out;
}

Elf_Scn* ElfFile::find_section(Elf64_Word type, const char* name) const {
  size_t names = 0;
  if (name != nullptr && elf_getshdrstrndx(elf_, &names) != 0) return nullptr;
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn != nullptr; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != type) continue;
    if (name == nullptr) return scn;
    const char* found = elf_strptr(elf_, names, shdr.sh_name);
    if (found != nullptr && std::strcmp(found, name) == 0) return scn;
  }
  return nullptr;
}

bool ElfFile::has_section(Elf64_Word type, const char* name) const { return find_section(type, name) != nullptr; }

void ElfFile::for_each_relocation(const RelocationVisitor& visit) const {
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn != nullptr; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_RELA || shdr.sh_entsize == 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    Elf_Scn* symbols = elf_getscn(elf_, shdr.sh_link);
    GElf_Shdr symbols_header;
    Elf_Data* symbol_data = symbols ? elf_getdata(symbols, nullptr) : nullptr;
    bool named = symbol_data != nullptr && gelf_getshdr(symbols, &symbols_header) != nullptr;
    size_t count = data ? data->d_size / shdr.sh_entsize : 0;
    for (size_t i = 0; i < count; ++i) {
      GElf_Rela rela;
      if (gelf_getrela(data, static_cast<int>(i), &rela) == nullptr) continue;
      const char* name = nullptr;
      GElf_Sym sym;
      size_t index = GELF_R_SYM(rela.r_info);
      if (named && index != 0 && gelf_getsym(symbol_data, static_cast<int>(index), &sym) != nullptr)
        name = elf_strptr(elf_, symbols_header.sh_link, sym.st_name);
      visit(rela, name != nullptr ? name : "");
    }
  }
}

std::string ElfFile::bytes_at(uint64_t vaddr, size_t size) const {
  size_t file_size = 0;
  const char* image = elf_rawfile(elf_, &file_size);
  size_t count = 0;
  if (image == nullptr || elf_getphdrnum(elf_, &count) != 0) return "";
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf_, static_cast<int>(i), &phdr) == nullptr || phdr.p_type != PT_LOAD) continue;
    if (vaddr < phdr.p_vaddr || vaddr - phdr.p_vaddr >= phdr.p_filesz) continue;
    uint64_t offset = phdr.p_offset + (vaddr - phdr.p_vaddr);
    if (offset >= file_size) return "";
    uint64_t in_segment = phdr.p_filesz - (vaddr - phdr.p_vaddr);
    size_t n = static_cast<size_t>(std::min<uint64_t>({size, in_segment, file_size - offset}));
    return std::string(image + offset, n);
  }
  return "";
}

Elf64_Half ElfFile::machine() const {
  GElf_Ehdr header;
  return gelf_getehdr(elf_, &header) != nullptr ? header.e_machine : EM_NONE;
}

bool ElfFile::for_each_symbol(Elf64_Word type, const SymbolVisitor& visit) const {
  Elf_Scn* scn = find_section(type, nullptr);
  if (scn == nullptr) return false;
  GElf_Shdr shdr;
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (gelf_getshdr(scn, &shdr) == nullptr || data == nullptr || shdr.sh_entsize == 0) return true;
  size_t count = data->d_size / shdr.sh_entsize;
  for (size_t i = 0; i < count; ++i) {
    GElf_Sym sym;
    if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) continue;
    const char* name = elf_strptr(elf_, shdr.sh_link, sym.st_name);
    if (name != nullptr) visit(sym, name);
  }
  return true;
}

}  // namespace symbolize
}  // namespace heaptype
