// IoEngine::run_batches with both engines: batches given while others are in flight, a source that
// waits for a completion, errors from the device and from completed(), on O_DIRECT files.
#include <fcntl.h>

#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "storage/data_file.h"
#include "storage/engine_select.h"
#include "storage/pread_engine.h"
#include "storage/store_test_support.h"

namespace stripesolve::storage {
namespace {

// Gives `batches` in order, each only after the batch `wait_for` before it has fully completed
// (0: no waiting), and records completions per (batch, request).
class ListSource final : public IoBatchSource {
 public:
  ListSource(std::vector<std::vector<IoRequest>> batches, size_t wait_for)
      : batches_(std::move(batches)), wait_for_(wait_for), left_(batches_.size()) {
    for (size_t b = 0; b < batches_.size(); ++b) left_[b] = batches_[b].size();
    calls_.assign(batches_.size(), {});
    for (size_t b = 0; b < batches_.size(); ++b) calls_[b].assign(batches_[b].size(), 0);
  }
  bool next_batch(std::span<const IoRequest>& batch) override {
    batch = {};
    if (next_ == batches_.size()) return false;
    if (wait_for_ > 0 && next_ >= wait_for_ && left_[next_ - wait_for_] > 0) {
      ++waits_;
      return true;
    }
    batch = batches_[next_++];
    return true;
  }
  Status completed(size_t batch, size_t index, Status result) override {
    ++calls_[batch][index];
    --left_[batch];
    if (!result.is_ok()) errors_.push_back(result);
    if (fail_at_ == std::pair{batch, index}) return Status::corruption("refused by the source");
    return result;
  }

  std::vector<std::vector<int>> calls_;
  std::vector<Status> errors_;
  std::pair<size_t, size_t> fail_at_{SIZE_MAX, SIZE_MAX};
  int waits_ = 0;

 private:
  std::vector<std::vector<IoRequest>> batches_;
  const size_t wait_for_;
  std::vector<size_t> left_;
  size_t next_ = 0;
};

class RunBatchesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "io_uring" && !io_uring_usable().is_ok()) {
      GTEST_SKIP() << "io_uring unavailable: " << io_uring_usable().message();
    }
    StoreConfig config;
    config.io_engine = GetParam();
    config.queue_depth = 4;
    config.request_bytes = 8192;
    config.write_request_bytes = 8192;
    engine_ = std::move(make_io_engine(config)).value();
    const std::string dir = make_temp_dir("batches");
    for (int f = 0; f < 2; ++f) {
      auto file = open_data_file(dir + "/f" + std::to_string(f), O_RDWR | O_CREAT, true);
      ASSERT_TRUE(file.is_ok());
      ASSERT_TRUE(preallocate(*file, kFileBytes).is_ok());
      files_.push_back(std::move(file).value());
    }
    out_ = std::move(AlignedBuffer::allocate(2 * kFileBytes)).value();
    in_ = std::move(AlignedBuffer::allocate(2 * kFileBytes)).value();
    std::mt19937_64 rng(9);
    for (uint64_t i = 0; i < out_.size(); ++i) out_.data()[i] = static_cast<std::byte>(rng());
  }

  // Ten batches of 1-4 requests of 4-40 KiB alternating over the two files; buffer offsets follow
  // the file offsets so that `in_` equals `out_` after a full read.
  std::vector<std::vector<IoRequest>> make_batches(IoOp op) {
    std::vector<std::vector<IoRequest>> batches(10);
    uint64_t file_offset[2] = {0, 0};
    int k = 0;
    for (auto& batch : batches) {
      for (int r = 0; r <= k % 4; ++r, ++k) {
        const int f = k % 2;
        const uint64_t len = 4096 * (1 + k % 10);
        std::byte* base = (op == IoOp::kWrite ? out_ : in_).data() + f * kFileBytes;
        batch.push_back(
            {op, files_[f].fd(), &files_[f].path(), file_offset[f], len, base + file_offset[f]});
        file_offset[f] += len;
      }
    }
    covered_[0] = file_offset[0];
    covered_[1] = file_offset[1];
    return batches;
  }

  static constexpr uint64_t kFileBytes = 1 << 20;
  std::shared_ptr<IoEngine> engine_;
  std::vector<DataFile> files_;
  AlignedBuffer out_, in_;
  uint64_t covered_[2] = {0, 0};  // bytes of each file the batches move

  // Whether `in_` equals `out_` over what the batches moved.
  bool read_back() const {
    for (int f = 0; f < 2; ++f) {
      if (std::memcmp(in_.data() + f * kFileBytes, out_.data() + f * kFileBytes, covered_[f]) !=
          0) {
        return false;
      }
    }
    return covered_[0] > 0 && covered_[1] > 0;
  }
};

TEST_P(RunBatchesTest, WritesThenReadsEveryBatchOnce) {
  ListSource writes(make_batches(IoOp::kWrite), 0);
  ASSERT_TRUE(engine_->run_batches(writes).is_ok());
  ListSource reads(make_batches(IoOp::kRead), 2);  // batch b waits for batch b - 2
  ASSERT_TRUE(engine_->run_batches(reads).is_ok());
  for (const ListSource* s : {&writes, &reads}) {
    for (const auto& batch : s->calls_) EXPECT_EQ(batch, std::vector<int>(batch.size(), 1));
    EXPECT_TRUE(s->errors_.empty());
  }
  EXPECT_TRUE(read_back());
  // The pread oracle agrees with what was written.
  std::memset(in_.data(), 0, in_.size());
  ListSource oracle(make_batches(IoOp::kRead), 0);
  ASSERT_TRUE(PreadEngine().run_batches(oracle).is_ok());
  EXPECT_TRUE(read_back());
}

TEST_P(RunBatchesTest, DeviceErrorEndsTheRunWithItsMessage) {
  auto batches = make_batches(IoOp::kRead);
  batches[3][0].offset = kFileBytes - 4096;  // runs past the end of the file
  batches[3][0].length = 3 * 4096;
  ListSource source(batches, 1);
  const Status st = engine_->run_batches(source);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_EQ(
      st.message().rfind(
          "read " + files_[batches[3][0].fd == files_[0].fd() ? 0 : 1].path() + " at offset ", 0),
      0u)
      << st.message();
  EXPECT_NE(st.message().find("unexpected end of file"), std::string::npos);
  EXPECT_EQ(source.calls_[3][0], 1);  // reported once, though it spans several chunks
  for (size_t b = 5; b < source.calls_.size(); ++b) {  // nothing started after the error
    EXPECT_EQ(source.calls_[b], std::vector<int>(source.calls_[b].size(), 0)) << b;
  }
}

TEST_P(RunBatchesTest, ErrorFromCompletedEndsTheRun) {
  ListSource source(make_batches(IoOp::kRead), 0);
  source.fail_at_ = {1, 0};
  const Status st = engine_->run_batches(source);
  EXPECT_EQ(st.message(), "refused by the source");
  EXPECT_EQ(source.calls_.back(), std::vector<int>(source.calls_.back().size(), 0));
}

TEST_P(RunBatchesTest, SourceWaitingWithNothingInFlightIsABug) {
  class Stuck final : public IoBatchSource {
   public:
    bool next_batch(std::span<const IoRequest>& batch) override {
      batch = {};
      return true;
    }
    Status completed(size_t, size_t, Status r) override { return r; }
  } stuck;
  EXPECT_EQ(engine_->run_batches(stuck).code(), StatusCode::kInternal);
}

INSTANTIATE_TEST_SUITE_P(Engines, RunBatchesTest, ::testing::Values("pread", "io_uring"));

}  // namespace
}  // namespace stripesolve::storage
