// Segment: process memory and /dev/shm objects (mode 0600, attach, size checks, unlink).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdint>
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
  CHECK(static_cast<size_t>(st.st_size) == 4096);
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
  REQUIRE_THROWS_WITH(Segment::create_shm(name, 4096), Contains("shm_open"));  // exists, no replace
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
