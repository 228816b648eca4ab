// Segment: process memory and /dev/shm objects (mode 0600, attach, size checks, unlink).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/shm/segment.hpp"
#include "tests/shm/shm_test_util.hpp"

using namespace bkv::shm;
using Catch::Matchers::Contains;

namespace {
bool shm_exists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm" + name).c_str(), &st) == 0;
}
}  // namespace

TEST_CASE("process segment is zeroed, page-aligned and movable", "[shm][segment]") {
  Segment s = Segment::create_process(10000);
  REQUIRE(s.size() == 10000);
  REQUIRE(s.kind() == Segment::Kind::kProcess);
  REQUIRE(reinterpret_cast<uintptr_t>(s.data()) % kSegmentAlign == 0);
  for (size_t i = 0; i < s.size(); ++i) REQUIRE(s.data()[i] == std::byte{0});
  s.data()[9999] = std::byte{42};
  Segment t = std::move(s);
  CHECK(s.data() == nullptr);
  CHECK(s.size() == 0);
  REQUIRE(t.data()[9999] == std::byte{42});
  REQUIRE_THROWS_WITH(Segment::create_process(0), Contains("size must be > 0"));
}

TEST_CASE("/dev/shm segment has mode 0600 whatever the umask", "[shm][segment]") {
  const std::string name = shmtest::shm_name("mode");
  // A umask of 0277 would turn a plain shm_open(..., 0600) into 0400.
  const mode_t old = ::umask(0277);
  Segment s = Segment::create_shm(name, 4096, /*replace_existing=*/true);
  ::umask(old);
  struct stat st {};
  REQUIRE(::stat(("/dev/shm" + name).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(static_cast<size_t>(st.st_size) == 4096 + kOwnerRecordBytes);  // the channel, then the owner record
  CHECK(s.owner());
  CHECK(s.name() == name);
}

TEST_CASE("attach maps the same bytes and checks the size", "[shm][segment]") {
  const std::string name = shmtest::shm_name("attach");
  Segment owner = Segment::create_shm(name, 8192, true);
  for (size_t i = 0; i < owner.size(); ++i) REQUIRE(owner.data()[i] == std::byte{0});
  {
    Segment a = Segment::attach_shm(name);
    REQUIRE(a.size() == 8192);
    REQUIRE_FALSE(a.owner());
    REQUIRE(a.data() != owner.data());  // a second mapping of the same object
    shmtest::store_le<uint64_t>(owner.data(), 4096, 0x1122334455667788ull);
    REQUIRE(shmtest::load_le<uint64_t>(a.data(), 4096) == 0x1122334455667788ull);
    shmtest::store_le<uint32_t>(a.data(), 100, 77);
    REQUIRE(shmtest::load_le<uint32_t>(owner.data(), 100) == 77);
    Segment b = Segment::attach_shm(name, 8192);
    REQUIRE(b.size() == 8192);
  }
  // A non-owner going away leaves the object in place.
  REQUIRE(shm_exists(name));
  REQUIRE_THROWS_WITH(Segment::attach_shm(name, 4096), Contains("has size 8192, expected 4096"));
  REQUIRE_THROWS_WITH(Segment::create_shm(name, 4096), Contains("is in use by live process"));  // exists, owner alive
}

TEST_CASE("the owner unlinks the name when destroyed", "[shm][segment]") {
  const std::string name = shmtest::shm_name("unlink");
  {
    Segment s = Segment::create_shm(name, 4096, true);
    REQUIRE(shm_exists(name));
    Segment moved = std::move(s);  // ownership moves with the object
    REQUIRE(shm_exists(name));
  }
  REQUIRE_FALSE(shm_exists(name));
  REQUIRE_THROWS_WITH(Segment::attach_shm(name), Contains("shm_open /bkv_test_unlink"));
}

TEST_CASE("bad shared-memory names and sizes are refused", "[shm][segment]") {
  REQUIRE_THROWS_WITH(Segment::create_shm("noslash", 64), Contains("must start with '/'"));
  REQUIRE_THROWS_WITH(Segment::create_shm("/", 64), Contains("must start with '/'"));
  REQUIRE_THROWS_WITH(Segment::create_shm("/a/b", 64), Contains("must not contain '/'"));
  REQUIRE_THROWS_WITH(Segment::create_shm("/" + std::string(300, 'x'), 64), Contains("longer than 255"));
  REQUIRE_THROWS_WITH(Segment::create_shm(shmtest::shm_name("zero"), 0), Contains("size must be > 0"));
  // A size that off_t cannot hold is refused by name, before any object is created.
  const std::string huge = shmtest::shm_name("huge");
  REQUIRE_THROWS_WITH(Segment::create_shm(huge, ~size_t{0}), Contains("exceeds the largest file size"));
  REQUIRE_THROWS_WITH(Segment::attach_shm(huge), Contains("shm_open"));  // nothing was left behind
}

TEST_CASE("a /dev/shm segment records its owner, and attachers see whether the owner lives", "[shm][segment][faults]") {
  const std::string name = shmtest::shm_name("owner");
  Segment owner = Segment::create_shm(name, 4096, true);
  Segment peer = Segment::attach_shm(name, 4096);
  CHECK(peer.owner_pid() == static_cast<int32_t>(::getpid()));
  CHECK(peer.owner_alive());
  CHECK(peer.size() == 4096);
  CHECK(Segment::create_process(64).owner_alive());
}

TEST_CASE("a stale segment (owner process gone) is replaced with a message, a live one is refused",
          "[shm][segment][faults]") {
  const std::string name = shmtest::shm_name("stale");
  // A child creates the segment and dies without unlinking it (as a crashed run would).
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      Segment s = Segment::create_shm(name, 4096, true);
      std::memset(s.data(), 0x5A, s.size());
      ::_exit(0);  // no destructor: the name stays
    } catch (...) {
      ::_exit(1);
    }
  }
  int ws = 0;
  REQUIRE(::waitpid(child, &ws, 0) == child);
  REQUIRE(WIFEXITED(ws));
  REQUIRE(WEXITSTATUS(ws) == 0);
  {
    Segment s = Segment::create_shm(name, 8192);  // no replace flag: recognised as stale
    CHECK(s.size() == 8192);
    CHECK(s.data()[0] == std::byte{0});  // a fresh object, not the old bytes
    // Now the owner (this process) lives: a second creator is refused, naming it.
    REQUIRE_THROWS_WITH(Segment::create_shm(name, 8192),
                        Contains("is in use by live process " + std::to_string(::getpid())));
  }
  // An object without an owner record (not made by Segment) is never removed.
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 4096) == 0);
  ::close(fd);
  REQUIRE_THROWS_WITH(Segment::create_shm(name, 4096), Contains("has no owner record"));
  REQUIRE_THROWS_WITH(Segment::attach_shm(name), Contains("has no owner record"));
  ::shm_unlink(name.c_str());
}

TEST_CASE("a segment larger than /dev/shm can hold fails at creation, naming the free space",
          "[shm][segment][faults]") {
  struct statvfs v {};
  REQUIRE(::statvfs("/dev/shm", &v) == 0);
  const uint64_t fs_bytes = uint64_t{v.f_blocks} * v.f_frsize;
  const std::string name = shmtest::shm_name("full");
  // More than the whole file system: tmpfs refuses the reservation at once (no page is
  // touched), where a lazy ftruncate-only segment would SIGBUS on first use.
  REQUIRE_THROWS_WITH(Segment::create_shm(name, fs_bytes + (uint64_t{1} << 20)),
                      Contains("posix_fallocate") && Contains("bytes free"));
  struct stat st {};
  CHECK(::stat(("/dev/shm" + name).c_str(), &st) != 0);  // nothing left behind
}
