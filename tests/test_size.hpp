// Test sizes under the sanitizers. A sanitizer build (BKV_SANITIZE=address or thread)
// compiles every test with BKV_TEST_REDUCED=1 (tests/CMakeLists.txt); there the slow tests
// run the same checks at a smaller size (fewer schedules, shorter runs), so that every
// test group runs under the sanitizers within CI's time. What each test reduces, and why
// the smaller size still checks the same thing, is in docs/reliability.md ("Sanitizers").
#pragma once

namespace bkv::test {

#if defined(BKV_TEST_REDUCED) && BKV_TEST_REDUCED
inline constexpr bool kReducedSize = true;
#else
inline constexpr bool kReducedSize = false;
#endif

// `full` in a normal build, `reduced` in a sanitizer build.
template <class T>
constexpr T sized(T full, T reduced) {
  return kReducedSize ? reduced : full;
}

}  // namespace bkv::test
