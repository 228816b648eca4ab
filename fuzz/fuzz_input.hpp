// Reading a libFuzzer input as a stream of little values: each harness turns the bytes
// into operations (write these bytes there, call, poll, reply, ...). Past the end every
// read returns zero, so any input, however short, is a valid program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

namespace bkv::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const noexcept { return pos_ >= size_; }
  size_t remaining() const noexcept { return empty() ? 0 : size_ - pos_; }

  template <class T>
  T take() noexcept {
    T v{};
    const size_t n = remaining() < sizeof(T) ? remaining() : sizeof(T);
    if (n > 0) std::memcpy(&v, data_ + pos_, n);
    pos_ += n;
    return v;
  }
  // A value in [0, bound) (bound > 0).
  uint32_t below(uint32_t bound) noexcept { return take<uint32_t>() % bound; }
  // Up to `max` of the following bytes (fewer near the end).
  std::span<const uint8_t> bytes(size_t max) noexcept {
    const size_t n = remaining() < max ? remaining() : max;
    std::span<const uint8_t> s(data_ + pos_, n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// A property the harness checks does not hold: say which and abort (libFuzzer then
// saves the input as a crash).
[[noreturn]] inline void violated(const char* what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

}  // namespace bkv::fuzz
