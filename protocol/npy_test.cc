#include "protocol/npy.h"

#include <gtest/gtest.h>

#include <cstring>

namespace stripesolve::protocol {
namespace {

TEST(NpyTest, HeaderRoundTripIsAlignedTo64) {
  for (auto shape : std::vector<std::vector<int64_t>>{{5}, {1000000, 3}}) {
    std::string h = make_npy_header(shape, false);
    EXPECT_EQ(h.size() % 64, 0u);
    EXPECT_EQ(h.back(), '\n');
    auto parsed = parse_npy_header(h);
    ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->shape, shape);
    EXPECT_FALSE(parsed->fortran_order);
    EXPECT_EQ(parsed->data_offset, h.size());
  }
  EXPECT_NE(make_npy_header({5}, false).find("'shape': (5,)"), std::string::npos);
  EXPECT_NE(make_npy_header({4, 2}, true).find("'shape': (4, 2)"), std::string::npos);
}

TEST(NpyTest, ToColumnMajorFromCOrder) {
  std::string img = make_npy_header({2, 3}, false);
  const double vals[] = {1, 2, 3, 4, 5, 6};  // rows (1,2,3), (4,5,6)
  img.append(reinterpret_cast<const char*>(vals), sizeof(vals));
  int64_t r = 0, c = 0;
  auto out = npy_to_column_major(img, &r, &c);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(r, 2);
  EXPECT_EQ(c, 3);
  EXPECT_EQ(*out, (std::vector<double>{1, 4, 2, 5, 3, 6}));
}

TEST(NpyTest, Errors) {
  EXPECT_EQ(parse_npy_header("NOTNUMPYxxxxxxxx").status().message(), "npy: bad magic (not a .npy file)");
  std::string h = make_npy_header({3}, false);
  std::string i4 = h;
  i4.replace(i4.find("<f8"), 3, "<i4");
  EXPECT_EQ(parse_npy_header(i4).status().message(),
            "npy: dtype '<i4' is not supported (need float64 '<f8')");
  int64_t r, c;
  EXPECT_EQ(npy_to_column_major(h + "abc", &r, &c).status().message(),
            "npy: shape (3, 1) needs 152 bytes, file has 131");
  EXPECT_EQ(parse_npy_header(h.substr(0, 20)).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace stripesolve::protocol
