// A memory segment that holds a shared-memory channel:
//  - a POSIX shared-memory object under /dev/shm, for channels between processes
//    (daemon process and client processes of one node). The creator is its owner:
//    shm_open(O_CREAT|O_EXCL, 0600) + fchmod(0600) (so the umask cannot widen or narrow
//    it) + ftruncate + mmap(MAP_SHARED); the owner unlinks the name when destroyed.
//    Other processes attach by name (mmap of the whole object) and may require a size.
//  - plain process memory (page-aligned, zeroed), for threads of one process and for
//    the simulator. Same interface, so the channel code does not know which it got.
//
// Channels never own a Segment: they work on a std::span<std::byte> view of one
// (segment.bytes()), and the caller keeps the Segment alive longer than the channel
// objects built on it.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
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
    Segment s;
    s.data_ = static_cast<std::byte*>(::operator new(size, std::align_val_t{kSegmentAlign}));
    std::memset(s.data_, 0, size);
    s.size_ = size;
    s.kind_ = Kind::kProcess;
    s.owner_ = true;
    return s;
  }

  // A new /dev/shm object of `size` bytes (zero-filled by ftruncate), mode 0600.
  // With replace_existing, a stale object of that name (say from a crashed run) is
  // unlinked first; otherwise an existing name is an error.
  static Segment create_shm(std::string_view name, size_t size, bool replace_existing = false) {
    validate_shm_name(name);
    if (size == 0) throw ShmError("shared-memory segment " + std::string(name) + ": size must be > 0");
    if (size > static_cast<uint64_t>(std::numeric_limits<off_t>::max()))
      throw ShmError("shared-memory segment " + std::string(name) + ": size " + std::to_string(size) +
                     " exceeds the largest file size " + std::to_string(std::numeric_limits<off_t>::max()));
    const std::string n(name);
    if (replace_existing) ::shm_unlink(n.c_str());  // ENOENT is fine
    const int fd = ::shm_open(n.c_str(), O_CREAT | O_EXCL | O_RDWR, kShmMode);
    if (fd < 0) throw ShmError(sys_message("shm_open(O_CREAT|O_EXCL) " + n));
    auto fail = [&](const std::string& what) {
      const std::string msg = sys_message(what);
      ::close(fd);
      ::shm_unlink(n.c_str());
      throw ShmError(msg);
    };
    if (::fchmod(fd, kShmMode) != 0) fail("fchmod 0600 " + n);
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) fail("ftruncate " + n + " to " + std::to_string(size));
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) fail("mmap " + n);
    ::close(fd);
    Segment s;
    s.data_ = static_cast<std::byte*>(p);
    s.size_ = size;
    s.kind_ = Kind::kPosixShm;
    s.owner_ = true;
    s.name_ = n;
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
    const size_t size = static_cast<size_t>(st.st_size);
    if (size == 0 || (expected_size != 0 && size != expected_size)) {
      ::close(fd);
      throw ShmError("shared-memory segment " + n + " has size " + std::to_string(size) + ", expected " +
                     (expected_size != 0 ? std::to_string(expected_size) : std::string("a non-zero size")));
    }
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const std::string msg = sys_message("mmap " + n);
      ::close(fd);
      throw ShmError(msg);
    }
    ::close(fd);
    Segment s;
    s.data_ = static_cast<std::byte*>(p);
    s.size_ = size;
    s.kind_ = Kind::kPosixShm;
    s.owner_ = false;
    s.name_ = n;
    return s;
  }

  std::byte* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  std::span<std::byte> bytes() const noexcept { return {data_, size_}; }
  Kind kind() const noexcept { return kind_; }
  bool owner() const noexcept { return owner_; }
  const std::string& name() const noexcept { return name_; }  // empty for process memory

 private:
  static std::string sys_message(const std::string& what) {
    const int e = errno;
    return what + " failed: " + std::strerror(e);
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
      ::munmap(data_, size_);
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
