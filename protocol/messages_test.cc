#include "protocol/messages.h"

#include <gtest/gtest.h>

namespace stripesolve::protocol {
namespace {

TEST(MessagesTest, HandshakePicksTheHighestCommonVersion) {
  auto v = negotiate_version(make_hello("test"));
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(*v, kProtocolVersion);
}

TEST(MessagesTest, HandshakeErrors) {
  Frame hello = make_hello("test");
  hello.header["min_version"] = 5;
  hello.header["max_version"] = 7;
  EXPECT_EQ(negotiate_version(hello).status().message(),
            "no common protocol version: client speaks 5..7, daemon speaks 1..1");
  Frame ping = make_frame(MessageType::kPing, 1);
  EXPECT_EQ(negotiate_version(ping).status().message(),
            "expected a hello frame first, got type 2 (ping)");
  Frame bad = make_hello("x");
  bad.header["min_version"] = "one";
  EXPECT_EQ(negotiate_version(bad).status().message(),
            "field 'min_version' must be an integer, got string");
}

TEST(MessagesTest, ErrorFrameRoundTrip) {
  Status st = Status::not_found("job 7 not found").set_retryable();
  Frame f = make_error_frame(9, st, "run 'stripesolve jobs'");
  EXPECT_EQ(f.flags, kFlagFinal);
  EXPECT_EQ(f.header["hint"], "run 'stripesolve jobs'");
  Status back = status_from_error_frame(f);
  EXPECT_EQ(back, st);
  EXPECT_TRUE(back.retryable());
}

TEST(MessagesTest, FieldAccessors) {
  nlohmann::json h = {{"job", 3}, {"name", "m"}, {"neg", -1}};
  EXPECT_EQ(*get_job_id(h), 3u);
  EXPECT_EQ(*get_string(h, "name"), "m");
  EXPECT_EQ(get_string(h, "x").status().message(), "missing field 'x'");
  EXPECT_EQ(get_int(h, "neg", 0, 10).status().message(), "field 'neg' is -1, must be in [0, 10]");
  EXPECT_EQ(*get_bool(h, "absent", true), true);
  EXPECT_EQ(*get_bool({{"b", false}}, "b", true), false);
  EXPECT_EQ(get_bool(h, "name", false).status().message(),
            "field 'name' must be a boolean, got string");
  EXPECT_EQ(message_type_name(104), "result_chunk");
  EXPECT_EQ(message_type_name(999), "unknown");
  EXPECT_TRUE(is_request_type(10));
  EXPECT_FALSE(is_request_type(101));
}

}  // namespace
}  // namespace stripesolve::protocol
