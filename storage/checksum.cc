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

// Shifting a CRC register over runs of zero bytes, to combine three interleaved streams
// (M. Adler's crc32c.c, zlib's crc32_combine): GF(2) 32x32 matrices as 32 column words.
uint32_t gf2_times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  for (; vec != 0; vec >>= 1, ++mat) {
    if (vec & 1) sum ^= *mat;
  }
  return sum;
}

void gf2_square(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = gf2_times(mat, mat[n]);
}

// Tables applying `len` (a power of two) zero bytes to a raw CRC register.
using ShiftTable = std::array<std::array<uint32_t, 256>, 4>;
ShiftTable make_shift_table(size_t len) {
  uint32_t odd[32], even[32];
  odd[0] = kPolynomial;
  for (int n = 1; n < 32; ++n) odd[n] = uint32_t{1} << (n - 1);
  gf2_square(even, odd);  // 2 zero bits
  gf2_square(odd, even);  // 4 zero bits
  const uint32_t* op = nullptr;
  for (;;) {
    gf2_square(even, odd);
    len >>= 1;
    if (len == 0) {
      op = even;
      break;
    }
    gf2_square(odd, even);
    len >>= 1;
    if (len == 0) {
      op = odd;
      break;
    }
  }
  ShiftTable t{};
  for (uint32_t n = 0; n < 256; ++n) {
    for (int k = 0; k < 4; ++k) t[k][n] = gf2_times(op, n << (8 * k));
  }
  return t;
}

constexpr size_t kStride = 8192;  // bytes per stream per round of the 3-way loop
const ShiftTable kShift = make_shift_table(kStride);

uint32_t shift(uint32_t crc) {
  return kShift[0][crc & 0xFF] ^ kShift[1][(crc >> 8) & 0xFF] ^ kShift[2][(crc >> 16) & 0xFF] ^
         kShift[3][crc >> 24];
}

// The crc32 instruction has a latency of 3 cycles and a throughput of 1: three independent streams
// over consecutive 8 KiB blocks keep it busy, then the partial CRCs are shifted and combined.
__attribute__((target("sse4.2"))) uint32_t crc32c_hardware(uint32_t crc, const unsigned char* p,
                                                           size_t size) {
  uint64_t c = crc;
  while (size >= 3 * kStride) {
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < kStride; i += 8) {
      uint64_t w0, w1, w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p + kStride + i, 8);
      std::memcpy(&w2, p + 2 * kStride + i, 8);
      c = __builtin_ia32_crc32di(c, w0);
      c1 = __builtin_ia32_crc32di(c1, w1);
      c2 = __builtin_ia32_crc32di(c2, w2);
    }
    c = shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1);
    c = shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c2);
    p += 3 * kStride;
    size -= 3 * kStride;
  }
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

bool crc32c_uses_hardware() {
  return kHardware;
}

}  // namespace stripesolve::storage

namespace stripesolve::storage {
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t size) {
  return ~crc32c_software(~crc, static_cast<const unsigned char*>(data), size);
}
}  // namespace stripesolve::storage
