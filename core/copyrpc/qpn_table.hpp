// copyrpc's table from QP number to endpoint: direct-indexed (24-bit QP numbers, two
// levels of 4096), O(1) without hashing.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>

namespace bkv::copyrpc {

class QpnTable {
 public:
  static constexpr uint32_t kQpnBits = 24;
  static constexpr uint32_t kPageBits = 12;
  static constexpr uint32_t kPageSize = 1u << kPageBits;
  static_assert(2 * kPageBits == kQpnBits, "two levels of pages cover the QP number");

  void set(uint32_t qpn, uint32_t ep) {
    if (qpn >= (1u << kQpnBits)) throw std::invalid_argument("copyrpc: QP number beyond 24 bits");
    auto& page = pages_[qpn >> kPageBits];
    if (!page) page = std::make_unique<uint32_t[]>(kPageSize);  // zero = no endpoint
    page[qpn & (kPageSize - 1)] = ep + 1;
  }
  // Returns endpoint id + 1, or 0 for an unknown QP number.
  uint32_t get(uint32_t qpn) const noexcept {
    if (qpn >= (1u << kQpnBits)) return 0;
    const auto& page = pages_[qpn >> kPageBits];
    return page ? page[qpn & (kPageSize - 1)] : 0;
  }

 private:
  std::unique_ptr<uint32_t[]> pages_[kPageSize];
};

}  // namespace bkv::copyrpc
