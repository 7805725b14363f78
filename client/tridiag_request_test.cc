#include "client/tridiag_request.h"

#include <gtest/gtest.h>

namespace stripesolve::client {
namespace {

TEST(TridiagRequestTest, SizesList) {
  EXPECT_EQ(*parse_sizes_list("3,5,2"), (std::vector<int64_t>{3, 5, 2}));
  EXPECT_EQ(*parse_sizes_list(" 7 "), (std::vector<int64_t>{7}));
  EXPECT_EQ(parse_sizes_list("3,,2").status().message(), "--sizes: '' is not a positive integer");
  EXPECT_EQ(parse_sizes_list("3,0").status().message(), "--sizes: '0' is not a positive integer");
  EXPECT_EQ(parse_sizes_list("4,-1").status().message(), "--sizes: '-1' is not a positive integer");
  EXPECT_EQ(parse_sizes_list("2,3,").status().message(), "--sizes: '' is not a positive integer");
  EXPECT_EQ(parse_sizes_list("99999999999999999999").status().message(),
            "--sizes: '99999999999999999999' is not a positive integer");
}

}  // namespace
}  // namespace stripesolve::client
