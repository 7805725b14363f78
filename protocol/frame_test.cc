#include "protocol/frame.h"

#include <random>

#include <gtest/gtest.h>

#include "protocol/messages.h"

namespace stripesolve::protocol {
namespace {

Frame sample_frame(uint64_t id, size_t payload_bytes) {
  Frame f = make_frame(MessageType::kSubmit, id, {{"job", {{"type", "dense_solve"}, {"n", 1000}}}});
  for (size_t i = 0; i < payload_bytes; ++i) f.payload.push_back(static_cast<char>(i * 7));
  return f;
}

TEST(FrameTest, RoundTripInOneFeed) {
  Frame in = sample_frame(42, 1000);
  in.flags = kFlagFinal;
  auto bytes = encode_frame(in);
  ASSERT_TRUE(bytes.is_ok());
  EXPECT_EQ(bytes->size(), kFixedHeaderBytes + in.header.dump().size() + 1000);
  FrameParser p;
  ASSERT_TRUE(p.feed(*bytes).is_ok());
  auto out = p.next();
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->type, in.type);
  EXPECT_EQ(out->flags, kFlagFinal);
  EXPECT_EQ(out->request_id, 42u);
  EXPECT_EQ(out->header, in.header);
  EXPECT_EQ(out->payload, in.payload);
  EXPECT_FALSE(p.next().has_value());
  EXPECT_TRUE(p.at_frame_boundary());
}

TEST(FrameTest, ByteByByteFeedYieldsTheSameFrames) {
  std::string stream;
  for (uint64_t i = 0; i < 5; ++i)
    ASSERT_TRUE(append_frame(stream, sample_frame(i, i * 13)).is_ok());
  FrameParser p;
  std::vector<Frame> got;
  for (char c : stream) {
    ASSERT_TRUE(p.feed(std::string_view(&c, 1)).is_ok());
    while (auto f = p.next()) got.push_back(std::move(*f));
  }
  ASSERT_EQ(got.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(got[i].request_id, i);
    EXPECT_EQ(got[i].payload.size(), i * 13);
  }
  EXPECT_EQ(p.frames_parsed(), 5u);
}

TEST(FrameTest, EmptyJsonHeaderIsAnEmptyObject) {
  std::string bytes = *encode_frame(sample_frame(1, 0));
  // Rewrite header_len to 0 and drop the JSON.
  const size_t json_len = bytes.size() - kFixedHeaderBytes;
  bytes.resize(kFixedHeaderBytes);
  bytes[12] = bytes[13] = bytes[14] = bytes[15] = 0;
  (void)json_len;
  FrameParser p;
  ASSERT_TRUE(p.feed(bytes).is_ok());
  auto f = p.next();
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(f->header.is_object());
  EXPECT_TRUE(f->header.empty());
}

TEST(FrameTest, BadMagicIsAClearStickyError) {
  FrameParser p;
  std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n          ";
  Status st = p.feed(junk);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "frame 0: bad magic 0x20544547 (expected 0x564c5353 \"SSLV\"): the peer does not speak "
            "the stripesolve protocol");
  EXPECT_TRUE(p.failed());
  EXPECT_EQ(p.feed(*encode_frame(sample_frame(1, 0))), st);
  EXPECT_FALSE(p.next().has_value());
}

TEST(FrameTest, LimitsAreEnforcedBeforeAllocation) {
  std::string bytes = *encode_frame(sample_frame(1, 0));
  bytes[24] = bytes[25] = bytes[26] = bytes[27] = static_cast<char>(0xff);  // 4 GiB payload
  FrameParser p;
  Status st = p.feed(bytes);
  EXPECT_EQ(st.message(),
            "frame 0: payload of 4294967295 bytes exceeds the limit of 4194304 bytes");
  EXPECT_EQ(p.buffered_bytes(), 0u);

  FrameParser small({.max_header_bytes = 10, .max_payload_bytes = 100});
  st = small.feed(*encode_frame(sample_frame(1, 0)));
  EXPECT_EQ(st.message().substr(0, 36), "frame 0: JSON header of 39 bytes exc");
}

TEST(FrameTest, VersionFlagsReservedAndJsonErrors) {
  auto with = [](size_t at, char v) {
    std::string b = *encode_frame(sample_frame(3, 4));
    b[at] = v;
    return b;
  };
  {
    FrameParser p;
    EXPECT_EQ(p.feed(with(4, 9)).message(),
              "frame 0: unsupported protocol version 9 (this side speaks 1..1)");
  }
  {
    FrameParser p;
    EXPECT_EQ(p.feed(with(8, 2)).message(), "frame 0: unknown flag bits 0x2");
  }
  {
    FrameParser p;
    EXPECT_EQ(p.feed(with(28, 1)).message(), "frame 0: reserved field is 0x1, must be 0");
  }
  {
    FrameParser p;
    EXPECT_EQ(p.feed(with(kFixedHeaderBytes, '[')).message(),
              "frame 0: JSON header of 39 bytes is not valid JSON");
  }
  {
    Frame f = make_frame(MessageType::kPing, 1, nlohmann::json::array({1, 2}));
    std::string b = *encode_frame(f);
    FrameParser p;
    EXPECT_EQ(p.feed(b).message(), "frame 0: JSON header must be an object, got array");
  }
  {
    std::string deep = std::string(40, '[') + std::string(40, ']');
    Frame f = make_frame(MessageType::kPing, 1);
    std::string b = *encode_frame(f);
    b.resize(kFixedHeaderBytes);
    std::string json = "{\"a\":" + deep + "}";
    b[12] = static_cast<char>(json.size());
    b += json;
    FrameParser p;
    EXPECT_EQ(p.feed(b).message(), "frame 0: JSON header nests deeper than 32 levels");
  }
}

TEST(FrameTest, EncodeRejectsOversizedPayload) {
  Frame f = sample_frame(1, 0);
  f.payload.assign(kDefaultMaxPayloadBytes + 1, 'x');
  auto r = encode_frame(f);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "payload of 4194305 bytes exceeds the limit of 4194304 bytes");
}

// Randomized robustness: random bytes, truncations and bit flips of valid streams never crash
// the parser; each feed either yields frames or one sticky error, and memory stays bounded.
TEST(FrameFuzzTest, RandomBytesTruncationsAndBitFlips) {
  std::mt19937_64 rng(12345);
  std::string valid;
  for (uint64_t i = 0; i < 8; ++i)
    ASSERT_TRUE(append_frame(valid, sample_frame(i, (i * 97) % 300)).is_ok());
  FrameLimits limits{.max_header_bytes = 4096, .max_payload_bytes = 1 << 16};
  int errors = 0, clean = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string input;
    const int mode = iter % 3;
    if (mode == 0) {
      input.resize(rng() % 400);
      for (char& c : input) c = static_cast<char>(rng());
      if (iter % 2 == 0 && input.size() >= 4) {
        input[0] = 'S';
        input[1] = 'S';
        input[2] = 'L';
        input[3] = 'V';  // get past the magic
      }
    } else if (mode == 1) {
      input = valid.substr(0, rng() % (valid.size() + 1));
    } else {
      input = valid;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k)
        input[rng() % input.size()] ^= static_cast<char>(1u << (rng() % 8));
    }
    FrameParser p(limits);
    size_t pos = 0;
    Status st;
    while (pos < input.size() && st.is_ok()) {
      const size_t n = 1 + rng() % 64;
      st = p.feed(std::string_view(input).substr(pos, n));
      pos += n;
      while (auto f = p.next()) {
        EXPECT_TRUE(f->header.is_object());
        EXPECT_LE(f->payload.size(), limits.max_payload_bytes);
      }
      EXPECT_LE(p.buffered_bytes(), kFixedHeaderBytes + limits.max_header_bytes);
    }
    if (!st.is_ok()) {
      ++errors;
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(st.message().rfind("frame ", 0), 0u) << st.message();
    } else {
      ++clean;
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(clean, 0);
}

}  // namespace
}  // namespace stripesolve::protocol
