#include "storage/checksum.h"

#include <array>
#include <cstring>

namespace stripesolve::storage {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

uint32_t crc32c_software(uint32_t crc, const unsigned char* p, size_t size) {
  for (size_t i = 0; i < size; ++i) crc = kTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_hardware(uint32_t crc, const unsigned char* p,
                                                          size_t size) {
  uint64_t c = crc;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
    p += 8;
    size -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (size > 0) {
    c32 = __builtin_ia32_crc32qi(c32, *p++);
    --size;
  }
  return c32;
}

bool detect_hardware() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}

const bool kHardware = detect_hardware();

}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  crc = kHardware ? crc32c_hardware(crc, p, size) : crc32c_software(crc, p, size);
  return ~crc;
}

bool crc32c_uses_hardware() { return kHardware; }

}  // namespace stripesolve::storage

namespace stripesolve::storage {
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t size) {
  return ~crc32c_software(~crc, static_cast<const unsigned char*>(data), size);
}
}  // namespace stripesolve::storage
