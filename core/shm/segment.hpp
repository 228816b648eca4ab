// A memory segment that holds a shared-memory channel:
//  - a POSIX shared-memory object under /dev/shm, for channels between processes
//    (daemon process and client processes of one node). The creator is its owner:
//    shm_open(O_CREAT|O_EXCL, 0600) + fchmod(0600) (so the umask cannot widen or narrow
//    it) + ftruncate + posix_fallocate (a full /dev/shm is an error at creation, not a
//    SIGBUS at the first touch of a page) + mmap(MAP_SHARED); the owner unlinks the
//    name when destroyed. Other processes attach by name and may require a size.
//    The object holds the channel's bytes and then an owner record:
//      [0, size)            the channel (what bytes() returns)
//      [size, size + 64)    {magic u64 "BKVSHMO1" @0, owner pid s32 @8, zero}
//    A name that already exists when creating is looked at: a segment whose owner
//    process is gone (a crashed run; kill(pid, 0) says ESRCH) is replaced with a
//    message on stderr; one whose owner lives is refused, naming the pid; one without
//    an owner record is refused (not ours to remove). Attachers can ask whether the
//    owner still lives (owner_alive()) to stop waiting on a dead peer.
//  - plain process memory (page-aligned, zeroed), for threads of one process and for
//    the simulator. Same interface, so the channel code does not know which it got.
//
// Channels never own a Segment: they work on a std::span<std::byte> view of one
// (segment.bytes()), and the caller keeps the Segment alive longer than the channel
// objects built on it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/shm/common.hpp"

namespace bkv::shm {

// Page alignment of process-memory segments (same as what mmap returns).
inline constexpr size_t kSegmentAlign = 4096;
static_assert(kSegmentAlign % kCacheLine == 0);

// Permission bits of every /dev/shm object we create: owner read/write only.
inline constexpr mode_t kShmMode = 0600;

// The owner record after the channel bytes of a /dev/shm object (layout above).
inline constexpr uint64_t kOwnerRecordMagic = 0x314F4D4853564B42ull;  // "BKVSHMO1"
inline constexpr size_t kOwnerRecordBytes = 64;
inline constexpr size_t kOwnerPidOffset = 8;
static_assert(kOwnerRecordBytes == kCacheLine && kOwnerPidOffset + sizeof(int32_t) <= kOwnerRecordBytes);

// Rule: a process is alive unless kill(pid, 0) says it does not exist (EPERM: it
// exists, owned by someone else). A pid <= 0 names no single process: not alive.
inline bool process_alive(int32_t pid) noexcept {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

// POSIX shm names: "/name", one leading slash and no other, at most NAME_MAX (255)
// characters after it (the object becomes the file /dev/shm/name).
inline void validate_shm_name(std::string_view name) {
  if (name.size() < 2 || name.front() != '/')
    throw ShmError("shared-memory name '" + std::string(name) + "' must start with '/' and have a name after it");
  if (name.find('/', 1) != std::string_view::npos)
    throw ShmError("shared-memory name '" + std::string(name) + "' must not contain '/' after the first character");
  if (name.size() - 1 > 255)
    throw ShmError("shared-memory name '" + std::string(name) + "' is longer than 255 characters");
}

class Segment {
 public:
  enum class Kind : uint8_t { kNone, kProcess, kPosixShm };

  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  Segment(Segment&& o) noexcept { swap(o); }
  Segment& operator=(Segment&& o) noexcept {
    if (this != &o) {
      release();
      swap(o);
    }
    return *this;
  }
  ~Segment() { release(); }

  // Zeroed, page-aligned process memory of `size` bytes.
  static Segment create_process(size_t size) {
    if (size == 0) throw ShmError("process segment: size must be > 0");
    Segment s(static_cast<std::byte*>(::operator new(size, std::align_val_t{kSegmentAlign})), size, Kind::kProcess,
              true, {});
    std::memset(s.data_, 0, size);
    return s;
  }

  // A new /dev/shm object of `size` channel bytes (zero-filled), mode 0600, owned by
  // this process. With replace_existing, an object of that name is unlinked first
  // whoever owns it; otherwise an existing name is looked at (header comment): a stale
  // one is replaced with a message on stderr, a live or foreign one is an error.
  static Segment create_shm(std::string_view name, size_t size, bool replace_existing = false) {
    validate_shm_name(name);
    if (size == 0) throw ShmError("shared-memory segment " + std::string(name) + ": size must be > 0");
    if (size > static_cast<uint64_t>(std::numeric_limits<off_t>::max()) - kOwnerRecordBytes)
      throw ShmError("shared-memory segment " + std::string(name) + ": size " + std::to_string(size) +
                     " exceeds the largest file size " + std::to_string(std::numeric_limits<off_t>::max()));
    const std::string n(name);
    const size_t total = size + kOwnerRecordBytes;
    if (replace_existing) ::shm_unlink(n.c_str());  // ENOENT is fine
    int fd = ::shm_open(n.c_str(), O_CREAT | O_EXCL | O_RDWR, kShmMode);
    if (fd < 0 && errno == EEXIST && !replace_existing) {
      remove_if_stale(n);  // throws unless the old object was stale and is gone now
      fd = ::shm_open(n.c_str(), O_CREAT | O_EXCL | O_RDWR, kShmMode);
    }
    if (fd < 0) throw ShmError(sys_message("shm_open(O_CREAT|O_EXCL) " + n));
    auto fail = [&](const std::string& msg) {
      ::close(fd);
      ::shm_unlink(n.c_str());
      throw ShmError(msg);
    };
    if (::fchmod(fd, kShmMode) != 0) fail(sys_message("fchmod 0600 " + n));
    if (::ftruncate(fd, static_cast<off_t>(total)) != 0) fail(sys_message("ftruncate " + n + " to " + std::to_string(total)));
    // Reserve every page now: tmpfs allocates lazily, and a page that cannot be had
    // later is a SIGBUS in whichever process touches it first.
    if (const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(total)); rc != 0)
      fail("posix_fallocate " + std::to_string(total) + " bytes for " + n + " failed: " + std::strerror(rc) +
           free_space_note(fd));
    void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) fail(sys_message("mmap " + n));
    ::close(fd);
    Segment s(static_cast<std::byte*>(p), size, Kind::kPosixShm, true, n);
    std::byte* rec = s.data_ + size;
    const int32_t pid = static_cast<int32_t>(::getpid());
    std::memcpy(rec + kOwnerPidOffset, &pid, sizeof pid);
    __atomic_thread_fence(__ATOMIC_RELEASE);  // the record may sit at any byte offset: no atomic store
    std::memcpy(rec, &kOwnerRecordMagic, sizeof kOwnerRecordMagic);
    return s;
  }

  // Maps an existing /dev/shm object in full. expected_size = 0 accepts any non-zero
  // size (the channel then validates it against its header); otherwise the object's
  // size must equal expected_size.
  static Segment attach_shm(std::string_view name, size_t expected_size = 0) {
    validate_shm_name(name);
    const std::string n(name);
    const int fd = ::shm_open(n.c_str(), O_RDWR, 0);
    if (fd < 0) throw ShmError(sys_message("shm_open " + n));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const std::string msg = sys_message("fstat " + n);
      ::close(fd);
      throw ShmError(msg);
    }
    const size_t total = static_cast<size_t>(st.st_size);
    if (total <= kOwnerRecordBytes) {
      ::close(fd);
      throw ShmError("shared-memory segment " + n + " has " + std::to_string(total) +
                     " bytes, too few for any channel and its owner record");
    }
    const size_t size = total - kOwnerRecordBytes;
    if (expected_size != 0 && size != expected_size) {
      ::close(fd);
      throw ShmError("shared-memory segment " + n + " has size " + std::to_string(size) + ", expected " +
                     std::to_string(expected_size));
    }
    void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const std::string msg = sys_message("mmap " + n);
      ::close(fd);
      throw ShmError(msg);
    }
    ::close(fd);
    Segment s(static_cast<std::byte*>(p), size, Kind::kPosixShm, false, n);
    uint64_t magic = 0;
    std::memcpy(&magic, s.data_ + size, sizeof magic);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (magic != kOwnerRecordMagic)
      throw ShmError("shared-memory segment " + n + " has no owner record (not made by this program, or still being made)");
    return s;
  }

  // The process that created a /dev/shm segment (0 for process memory). Read from the
  // segment, so a forger can change it: a liveness hint, never used as an index.
  int32_t owner_pid() const noexcept {
    if (kind_ != Kind::kPosixShm) return 0;
    int32_t pid = 0;
    std::memcpy(&pid, data_ + size_ + kOwnerPidOffset, sizeof pid);
    return pid;
  }
  // Whether the creator still runs (always true for process memory: it is ours).
  bool owner_alive() const noexcept { return kind_ != Kind::kPosixShm || process_alive(owner_pid()); }

  std::byte* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  std::span<std::byte> bytes() const noexcept { return {data_, size_}; }
  Kind kind() const noexcept { return kind_; }
  bool owner() const noexcept { return owner_; }
  const std::string& name() const noexcept { return name_; }  // empty for process memory

 private:
  // Takes over memory already mapped or allocated (release() frees it as `kind` says).
  Segment(std::byte* data, size_t size, Kind kind, bool owner, std::string name) noexcept
      : data_(data), size_(size), kind_(kind), owner_(owner), name_(std::move(name)) {}

  static std::string sys_message(const std::string& what) {
    const int e = errno;
    return what + " failed: " + std::strerror(e);
  }

  static std::string free_space_note(int fd) {
    struct statvfs v {};
    if (::fstatvfs(fd, &v) != 0) return "";
    return " (the file system holding it has " + std::to_string(uint64_t{v.f_bavail} * v.f_frsize) + " of " +
           std::to_string(uint64_t{v.f_blocks} * v.f_frsize) + " bytes free)";
  }

  // An existing object of that name: removed if its owner process is gone (with a
  // message), else ShmError naming why it stays.
  static void remove_if_stale(const std::string& n) {
    const int fd = ::shm_open(n.c_str(), O_RDONLY, 0);
    if (fd < 0) {
      if (errno == ENOENT) return;  // gone meanwhile: the caller creates it
      throw ShmError(sys_message("shm_open " + n + " (it exists)"));
    }
    struct stat st {};
    uint64_t magic = 0;
    int32_t pid = 0;
    bool has_record = false;
    if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) > kOwnerRecordBytes) {
      const off_t at = st.st_size - static_cast<off_t>(kOwnerRecordBytes);
      has_record = ::pread(fd, &magic, sizeof magic, at) == sizeof magic && magic == kOwnerRecordMagic &&
                   ::pread(fd, &pid, sizeof pid, at + static_cast<off_t>(kOwnerPidOffset)) == sizeof pid;
    }
    ::close(fd);
    if (!has_record)
      throw ShmError("shared-memory segment " + n + " already exists and has no owner record (not made by this "
                     "program, or still being made); remove /dev/shm" + n + " if it is left over");
    if (process_alive(pid))
      throw ShmError("shared-memory segment " + n + " is in use by live process " + std::to_string(pid));
    std::fprintf(stderr, "shared-memory segment %s: replacing a stale segment left by process %d, which no longer exists\n",
                 n.c_str(), static_cast<int>(pid));
    if (::shm_unlink(n.c_str()) != 0 && errno != ENOENT) throw ShmError(sys_message("shm_unlink stale " + n));
  }

  void swap(Segment& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(kind_, o.kind_);
    std::swap(owner_, o.owner_);
    std::swap(name_, o.name_);
  }

  void release() noexcept {
    if (data_ == nullptr) return;
    if (kind_ == Kind::kProcess) {
      ::operator delete(data_, std::align_val_t{kSegmentAlign});
    } else {
      ::munmap(data_, size_ + kOwnerRecordBytes);
      if (owner_) ::shm_unlink(name_.c_str());
    }
    data_ = nullptr;
    size_ = 0;
    kind_ = Kind::kNone;
    owner_ = false;
    name_.clear();
  }

  std::byte* data_ = nullptr;
  size_t size_ = 0;
  Kind kind_ = Kind::kNone;
  bool owner_ = false;
  std::string name_;
};

}  // namespace bkv::shm
