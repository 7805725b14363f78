#include "base/status.h"

#include <cerrno>

#include <gtest/gtest.h>

namespace stripesolve {
namespace {

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.to_string(), "OK");
  EXPECT_FALSE(s.retryable());
  EXPECT_FALSE(s.data_lost());
}

TEST(Status, CarriesCodeMessageAndFlags) {
  Status s = Status::io_error("write of stripe 3 failed").set_retryable().set_data_lost();
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(), "write of stripe 3 failed");
  EXPECT_EQ(s.to_string(), "IoError: write of stripe 3 failed (retryable) (data lost)");
}

TEST(Status, WithContextPrefixes) {
  Status s = Status::corruption("checksum mismatch").with_context("matrix 'a' segment 7");
  EXPECT_EQ(s.message(), "matrix 'a' segment 7: checksum mismatch");
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_TRUE(Status::ok().with_context("ignored").is_ok());
}

TEST(Status, FromErrnoClassifies) {
  Status nospace = Status::from_errno(ENOSPC, "write /ssd0/a.seg at offset 4096");
  EXPECT_EQ(nospace.code(), StatusCode::kNoSpace);
  EXPECT_EQ(nospace.message(),
            "write /ssd0/a.seg at offset 4096: No space left on device (errno 28)");
  EXPECT_FALSE(nospace.retryable());

  Status again = Status::from_errno(EAGAIN, "read");
  EXPECT_EQ(again.code(), StatusCode::kIoError);
  EXPECT_TRUE(again.retryable());

  EXPECT_EQ(Status::from_errno(ENOENT, "open x").code(), StatusCode::kNotFound);
  EXPECT_EQ(Status::from_errno(EIO, "read").code(), StatusCode::kIoError);
}

Result<int> parse_positive(int v) {
  if (v <= 0) return Status::invalid_argument("value " + std::to_string(v) + " is not positive");
  return v;
}

Result<int> twice_positive(int v) {
  STRIPESOLVE_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check_positive(int v) {
  STRIPESOLVE_RETURN_IF_ERROR(parse_positive(v).status());
  return Status::ok();
}

TEST(Result, HoldsValueOrError) {
  Result<int> good = parse_positive(4);
  ASSERT_TRUE(good.is_ok());
  EXPECT_EQ(*good, 4);
  EXPECT_TRUE(good.status().is_ok());

  Result<int> bad = parse_positive(-1);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "value -1 is not positive");
}

TEST(Result, MacrosPropagate) {
  EXPECT_EQ(*twice_positive(21), 42);
  EXPECT_EQ(twice_positive(0).status().message(), "value 0 is not positive");
  EXPECT_TRUE(check_positive(1).is_ok());
  EXPECT_EQ(check_positive(-3).code(), StatusCode::kInvalidArgument);
}

TEST(Result, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  Result<int> bad = Status::not_found("no matrix 'm'");
  EXPECT_DEATH((void)bad.value(), "value\\(\\) called on an error Result: NotFound: no matrix 'm'");
}

TEST(ResultDeathTest, OkStatusAborts) {
  EXPECT_DEATH((void)Result<int>{Status::ok()}, "Result constructed from an OK Status");
}

}  // namespace
}  // namespace stripesolve
