#include "protocol/descriptors.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "protocol/descriptor_test_support.h"

namespace stripesolve::protocol {
namespace {

struct SocketPair {
  int a = -1, b = -1;
  SocketPair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    a = sv[0];
    b = sv[1];
  }
  ~SocketPair() {
    ::close(a);
    ::close(b);
  }
};

bool is_open(int fd) {
  return ::fcntl(fd, F_GETFD) != -1;
}

std::vector<UniqueFd> pipes(int n, std::vector<int>* raw) {
  std::vector<UniqueFd> out;
  for (int i = 0; i < n; ++i) {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    out.emplace_back(p[0]);
    ::close(p[1]);
    raw->push_back(p[0]);
  }
  return out;
}

TEST(Descriptors, TravelWithTheFirstBytesAndOneBatchPerRead) {
  SocketPair s;
  std::vector<int> raw1, raw2;
  auto first = pipes(2, &raw1);
  auto second = pipes(3, &raw2);
  ASSERT_TRUE(send_with_descriptors(s.a, "frame-one", raw1).is_ok());
  ASSERT_TRUE(send_with_descriptors(s.a, "frame-two", raw2).is_ok());
  std::array<char, 64> buf{};
  std::vector<UniqueFd> got;
  // The first read stops after the message that carried descriptors.
  auto r = receive_with_descriptors(s.b, buf.data(), buf.size(), false, &got);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(std::string(buf.data(), r->bytes), "frame-one");
  ASSERT_EQ(got.size(), 2u);
  got.clear();
  r = receive_with_descriptors(s.b, buf.data(), buf.size(), false, &got);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(std::string(buf.data(), r->bytes), "frame-two");
  EXPECT_EQ(got.size(), 3u);
  r = receive_with_descriptors(s.b, buf.data(), buf.size(), true, &got);
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->would_block);
}

TEST(Descriptors, TooManyInOneMessageIsAnErrorAndNothingLeaks) {
  SocketPair s;
  std::vector<int> raw;
  auto fds = pipes(kMaxFrameDescriptors + 1, &raw);
  // The sender refuses; a raw sendmsg with nine gets through to the receiver's check.
  EXPECT_EQ(send_with_descriptors(s.a, "x", raw).message(),
            "9 descriptors in one frame, at most 8");
  ASSERT_EQ(send_unchecked(s.a, "x", raw), 1);
  std::vector<UniqueFd> got;
  std::array<char, 8> buf{};
  auto r = receive_with_descriptors(s.b, buf.data(), buf.size(), false, &got);
  EXPECT_EQ(r.status().message(), "more than 8 descriptors arrived with one message");
  EXPECT_TRUE(got.empty());
}

TEST(Descriptors, QueueMatchesBatchesToDeclaringFrames) {
  std::vector<int> raw;
  DescriptorQueue q;
  ASSERT_TRUE(q.add(pipes(2, &raw)).is_ok());
  EXPECT_TRUE(q.check(/*at_frame_boundary=*/false).is_ok());  // its frame is still being read
  auto none = q.take(0);                                      // a frame before it declares none
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
  auto two = q.take(2);
  ASSERT_TRUE(two.is_ok());
  EXPECT_EQ(two->size(), 2u);
  EXPECT_TRUE(q.check(true).is_ok());
  EXPECT_EQ(q.take(1).status().message(),
            "the frame declares 1 descriptors but none arrived with it");
}

TEST(Descriptors, WrongCountsAndUndeclaredBatchesAreErrorsAndAreClosed) {
  std::vector<int> raw;
  DescriptorQueue q;
  ASSERT_TRUE(q.add(pipes(3, &raw)).is_ok());
  EXPECT_EQ(q.take(2).status().message(), "the frame declares 2 descriptors but 3 arrived with it");
  for (int fd : raw) EXPECT_FALSE(is_open(fd));
  raw.clear();
  ASSERT_TRUE(q.add(pipes(1, &raw)).is_ok());
  EXPECT_EQ(q.check(true).message(), "descriptors arrived that no frame declares");
  EXPECT_FALSE(is_open(raw[0]));
  EXPECT_EQ(q.held(), 0u);
  raw.clear();
  ASSERT_TRUE(q.add(pipes(1, &raw)).is_ok());
  ASSERT_TRUE(q.add(pipes(1, &raw)).is_ok());
  EXPECT_EQ(q.add(pipes(1, &raw)).message(), "descriptors arrived that no frame declares");
  q.clear();
  for (int fd : raw) EXPECT_FALSE(is_open(fd));
}

TEST(Descriptors, DeclaredCountIsBounded) {
  EXPECT_EQ(*declared_descriptors(nlohmann::json::object()), 0u);
  EXPECT_EQ(*declared_descriptors({{"fds", 4}}), 4u);
  EXPECT_EQ(declared_descriptors({{"fds", 9}}).status().message(),
            "field 'fds' must be an integer in [0, 8], got 9");
  EXPECT_EQ(declared_descriptors({{"fds", "2"}}).status().message(),
            "field 'fds' must be an integer in [0, 8], got \"2\"");
}

}  // namespace
}  // namespace stripesolve::protocol
