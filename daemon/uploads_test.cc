#include "daemon/uploads.h"

#include <gtest/gtest.h>

namespace stripesolve::daemon {
namespace {

// Dropping a connection frees only its unclaimed uploads, expiry only the old ones, and both
// give their bytes back to the account.
TEST(UploadStore, DropsAndExpiriesReturnTheirBytes) {
  UploadStore store(1000);
  const uid_t owner = 1000;
  ASSERT_TRUE(store.reserve(10).is_ok());
  const uint64_t a = store.put(owner, std::string(10, 'a'), 1);
  ASSERT_TRUE(store.reserve(20).is_ok());
  const uint64_t b = store.put(owner, std::string(20, 'b'), 1);
  ASSERT_TRUE(store.reserve(40).is_ok());
  store.put(owner, std::string(40, 'c'), 2);
  EXPECT_EQ(store.bytes_held(), 70u);
  store.claim_named(owner, {{"rhs", {{"upload", b}}}});
  EXPECT_EQ(store.drop_connection(1), 1u);  // a; b is claimed
  EXPECT_EQ(store.bytes_held(), 60u);
  EXPECT_FALSE(store.take(owner, a).is_ok());
  const auto now = std::chrono::steady_clock::now();
  EXPECT_EQ(store.expire(now, std::chrono::seconds(60)), 0u);
  EXPECT_EQ(store.expire(now + std::chrono::seconds(61), std::chrono::seconds(60)), 2u);
  EXPECT_EQ(store.bytes_held(), 0u);
}

}  // namespace
}  // namespace stripesolve::daemon
