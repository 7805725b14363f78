#include "storage/pread_engine.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

#include <gtest/gtest.h>

namespace stripesolve::storage {
namespace {

// Replays a script of results: a positive number moves at most that many bytes, a negative one
// fails with that errno; after the script, calls pass through.
class ScriptedIo : public PosixIo {
 public:
  explicit ScriptedIo(std::deque<long> script) : script_(std::move(script)) {}
  ssize_t pread(int fd, void* buf, size_t count, off_t offset) override {
    return step(count, [&](size_t c) { return PosixIo::pread(fd, buf, c, offset); });
  }
  ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) override {
    return step(count, [&](size_t c) { return PosixIo::pwrite(fd, buf, c, offset); });
  }
  int calls = 0;

 private:
  template <typename F>
  ssize_t step(size_t count, F call) {
    ++calls;
    if (script_.empty()) return call(count);
    const long s = script_.front();
    script_.pop_front();
    if (s < 0) {
      errno = static_cast<int>(-s);
      return -1;
    }
    return call(std::min(count, static_cast<size_t>(s)));
  }
  std::deque<long> script_;
};

class PreadEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/pread_engine_test." + std::to_string(::getpid());
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  std::string path_;
  int fd_ = -1;
};

TEST_F(PreadEngineTest, ShortTransfersAndRetriesComplete) {
  std::vector<std::byte> out(10000), in(10000);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(i * 7);
  auto io = std::make_shared<ScriptedIo>(std::deque<long>{100, -EINTR, -EAGAIN, 3000, 1});
  PreadEngine engine(io);
  IoRequest w{IoOp::kWrite, fd_, &path_, 4096, out.size(), out.data()};
  ASSERT_TRUE(engine.run({&w, 1}).is_ok());
  EXPECT_EQ(io->calls, 6);  // 100, EINTR, EAGAIN, 3000, 1, rest
  IoRequest r{IoOp::kRead, fd_, &path_, 4096, in.size(), in.data()};
  ASSERT_TRUE(PreadEngine().run({&r, 1}).is_ok());
  EXPECT_EQ(in, out);
}

TEST_F(PreadEngineTest, ErrorsNamePathOffsetAndErrno) {
  std::vector<std::byte> buf(8192);
  auto io = std::make_shared<ScriptedIo>(std::deque<long>{4096, -EIO});
  PreadEngine engine(io);
  IoRequest w{IoOp::kWrite, fd_, &path_, 8192, buf.size(), buf.data()};
  Status st = engine.run({&w, 1});
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_EQ(st.message(), "write " + path_ + " at offset 12288 (length 4096): " +
                              std::strerror(EIO) + " (errno 5)");
  EXPECT_TRUE(st.data_lost());

  auto full = std::make_shared<ScriptedIo>(std::deque<long>{-ENOSPC});
  st = PreadEngine(full).run({&w, 1});
  EXPECT_EQ(st.code(), StatusCode::kNoSpace);
}

TEST_F(PreadEngineTest, EndOfFileIsCorruption) {
  std::vector<std::byte> buf(4096);
  ASSERT_EQ(::pwrite(fd_, buf.data(), 1000, 0), 1000);
  IoRequest r{IoOp::kRead, fd_, &path_, 0, 4096, buf.data()};
  Status st = PreadEngine().run({&r, 1});
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_EQ(st.message(), "read " + path_ +
                              " at offset 1000 (length 3096): unexpected end of "
                              "file after 1000 of 4096 bytes");
}

TEST_F(PreadEngineTest, EndlessEintrGivesUpRetryable) {
  std::deque<long> script(kMaxRetries + 1, -EINTR);
  std::vector<std::byte> buf(4096);
  IoRequest r{IoOp::kRead, fd_, &path_, 0, 4096, buf.data()};
  Status st = PreadEngine(std::make_shared<ScriptedIo>(script)).run({&r, 1});
  EXPECT_TRUE(st.retryable());
  EXPECT_EQ(st.code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace stripesolve::storage
