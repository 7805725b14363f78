#include "storage/checksum.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace stripesolve::storage {
namespace {

TEST(Crc32c, KnownVectors) {
  // RFC 3720 B.4 / the standard check value of CRC-32C.
  EXPECT_EQ(crc32c_extend(0, "123456789", 9), 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0);
  EXPECT_EQ(crc32c_extend(0, zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c_extend_portable(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32c, HardwareMatchesPortableAndExtends) {
  std::string s;
  for (int i = 0; i < 100003; ++i) s.push_back(static_cast<char>(i * 131 + 7 + (i >> 9)));
  const uint32_t whole = crc32c_extend(0, s.data(), s.size());
  EXPECT_EQ(whole, crc32c_extend_portable(0, s.data(), s.size()));
  for (size_t cut : {0u, 1u, 7u, 8u, 4096u, 24576u, 24577u, 60000u, 100002u}) {
    EXPECT_EQ(crc32c_extend(0, s.data() + cut, s.size() - cut),
              crc32c_extend_portable(0, s.data() + cut, s.size() - cut));
    EXPECT_EQ(crc32c_extend(crc32c_extend(0, s.data(), cut), s.data() + cut, s.size() - cut),
              whole);
  }
}

}  // namespace
}  // namespace stripesolve::storage
