#include "base/units.h"

#include <gtest/gtest.h>

namespace stripesolve {
namespace {

TEST(ParseBytes, Units) {
  EXPECT_EQ(parse_bytes("4096"), 4096u);
  EXPECT_EQ(parse_bytes("64GiB"), 64 * kGiB);
  EXPECT_EQ(parse_bytes("512 MiB"), 512 * kMiB);
  EXPECT_EQ(parse_bytes("1.5gib"), 3 * kGiB / 2);
  EXPECT_EQ(parse_bytes("2kB"), 2000u);
  EXPECT_EQ(parse_bytes("3TB"), 3'000'000'000'000u);
}

TEST(ParseBytes, Rejects) {
  EXPECT_EQ(parse_bytes(""), std::nullopt);
  EXPECT_EQ(parse_bytes("lots"), std::nullopt);
  EXPECT_EQ(parse_bytes("-1GiB"), std::nullopt);
  EXPECT_EQ(parse_bytes("1.5"), std::nullopt);
  EXPECT_EQ(parse_bytes("10 parsecs"), std::nullopt);
  EXPECT_EQ(parse_bytes("99999999999TiB"), std::nullopt);
}

TEST(FormatBytes, Binary) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3 * kGiB / 2), "1.50 GiB");
  EXPECT_EQ(format_bytes(kKiB), "1.00 KiB");
}

}  // namespace
}  // namespace stripesolve
