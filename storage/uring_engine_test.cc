// The io_uring engine against the pread oracle, on O_DIRECT files.
#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "storage/data_file.h"
#include "storage/engine_select.h"
#include "storage/pread_engine.h"
#include "storage/store_test_support.h"

namespace stripesolve::storage {
namespace {

class UringEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status usable = io_uring_usable();
    if (!usable.is_ok()) GTEST_SKIP() << "io_uring unavailable: " << usable.message();
    StoreConfig config;
    config.io_engine = "io_uring";
    config.queue_depth = 4;
    config.request_bytes = 8192;
    config.write_request_bytes = 8192;
    auto e = make_io_engine(config);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    engine_ = *e;
    ASSERT_EQ(engine_->name(), "io_uring");
    dir_ = make_temp_dir("uring");
  }
  std::shared_ptr<IoEngine> engine_;
  std::string dir_;
};

TEST_F(UringEngineTest, MatchesPreadOracleOnManyFiles) {
  // Three files, many requests of mixed sizes: more chunks than the queue depth.
  std::vector<DataFile> files;
  for (int f = 0; f < 3; ++f) {
    auto file = open_data_file(dir_ + "/f" + std::to_string(f), O_RDWR | O_CREAT, true);
    ASSERT_TRUE(file.is_ok());
    ASSERT_TRUE(preallocate(*file, 1 << 20).is_ok());
    files.push_back(std::move(file).value());
  }
  auto out = std::move(AlignedBuffer::allocate(3 << 20)).value();
  auto in = std::move(AlignedBuffer::allocate(3 << 20)).value();
  std::mt19937_64 rng(5);
  for (uint64_t i = 0; i < out.size(); ++i) out.data()[i] = static_cast<std::byte>(rng());
  std::vector<IoRequest> writes, reads;
  uint64_t buf = 0;
  for (int k = 0; k < 30; ++k) {
    const int f = k % 3;
    const uint64_t len = 4096 * (1 + rng() % 20);
    const uint64_t off = 4096 * (k / 3) * 21;
    writes.push_back({IoOp::kWrite, files[f].fd(), &files[f].path(), off, len, out.data() + buf});
    reads.push_back({IoOp::kRead, files[f].fd(), &files[f].path(), off, len, in.data() + buf});
    buf += len;
  }
  std::vector<int> completions(writes.size(), 0);
  ASSERT_TRUE(engine_->run(writes, [&](size_t k) { ++completions[k]; }).is_ok());
  EXPECT_EQ(completions, std::vector<int>(writes.size(), 1));
  ASSERT_TRUE(PreadEngine().run(reads).is_ok());
  EXPECT_EQ(std::memcmp(in.data(), out.data(), buf), 0);
  std::memset(in.data(), 0, buf);
  ASSERT_TRUE(engine_->run(reads).is_ok());
  EXPECT_EQ(std::memcmp(in.data(), out.data(), buf), 0);
}

TEST_F(UringEngineTest, ErrorsMatchThePreadEngine) {
  auto file = std::move(open_data_file(dir_ + "/short", O_RDWR | O_CREAT, true)).value();
  ASSERT_TRUE(preallocate(file, 8192).is_ok());
  auto buf = std::move(AlignedBuffer::allocate(16384)).value();
  // Reading past the end: a short read, then end of file.
  const IoRequest past{IoOp::kRead, file.fd(), &file.path(), 4096, 12288, buf.data()};
  const Status a = engine_->run({&past, 1});
  const Status b = PreadEngine().run({&past, 1});
  // Both name the file and report end of file (the io_uring engine names the chunk that hit it).
  EXPECT_EQ(a.code(), StatusCode::kCorruption);
  EXPECT_EQ(b.code(), StatusCode::kCorruption);
  EXPECT_EQ(a.message().rfind("read " + file.path() + " at offset ", 0), 0u) << a.message();
  EXPECT_NE(a.message().find("unexpected end of file"), std::string::npos) << a.message();
  // A bad descriptor: -EBADF named with path and offset.
  const std::string name = "nowhere";
  const IoRequest bad{IoOp::kWrite, -1, &name, 0, 4096, buf.data()};
  EXPECT_EQ(engine_->run({&bad, 1}).message(),
            std::string("write nowhere at offset 0 (length 4096): ") +
                std::strerror(EBADF) +  // NOLINT(concurrency-mt-unsafe): one thread
                " (errno 9)");
}

// A batch is cut into pieces that fill the queue, as large as request_bytes allows and never
// below 1 MiB (or request_bytes where that is smaller), each a multiple of 4 KiB.
TEST(ChunkBytes, SpreadsABatchOverTheQueueBetweenOneMiBAndTheRequestSize) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  EXPECT_EQ(chunk_bytes(448 * kMiB, 32, 16 * kMiB), 14 * kMiB);  // a part of the load of A
  EXPECT_EQ(chunk_bytes(4096 * kMiB, 32, 16 * kMiB), 16 * kMiB);
  EXPECT_EQ(chunk_bytes(128 * kMiB, 32, 16 * kMiB), 4 * kMiB);  // one of import's write batches
  EXPECT_EQ(chunk_bytes(8 * kMiB, 32, 16 * kMiB), kMiB);
  EXPECT_EQ(chunk_bytes(8 * kMiB, 32, 8192), 8192);  // request_bytes below 1 MiB is kept
  EXPECT_EQ(chunk_bytes(100 * kMiB + 1, 32, 16 * kMiB), 100 * kMiB / 32 + 4096);  // 4 KiB pages
  EXPECT_EQ(chunk_bytes(64 * kMiB, 0, 16 * kMiB), 16 * kMiB);  // a depth of 0 counts as 1
}

TEST(EngineSelect, PreadOnRequestAndUnknownRejected) {
  StoreConfig config;
  config.io_engine = "pread";
  EXPECT_EQ((*make_io_engine(config))->name(), "pread");
  config.io_engine = "aio";
  EXPECT_EQ(make_io_engine(config).status().message(),
            "unknown io_engine 'aio' (expected auto, io_uring or pread)");
  config.io_engine = "auto";
  auto e = make_io_engine(config);
  ASSERT_TRUE(e.is_ok());
  EXPECT_EQ((*e)->name(), io_uring_usable().is_ok() ? "io_uring" : "pread");
}

// A StoreConfig filled in by code gets the YAML's limits too, whichever engine it asks for.
TEST(EngineSelect, RequestSizesOffFourKiBOrOutOfRangeAreRefused) {
  for (const char* engine : {"pread", "auto"}) {
    StoreConfig config;
    config.io_engine = engine;
    config.request_bytes = 6000;
    EXPECT_EQ(make_io_engine(config).status().message(),
              "store request_bytes 6000 must be a multiple of 4KiB from 4KiB to 1GiB");
    config.request_bytes = 2 * kGiB;
    EXPECT_EQ(make_io_engine(config).status().code(), StatusCode::kInvalidArgument);
    config.request_bytes = 16 * kMiB;
    config.write_request_bytes = 0;
    EXPECT_EQ(make_io_engine(config).status().message(),
              "store write_request_bytes 0 must be a multiple of 4KiB from 4KiB to 1GiB");
    config.write_request_bytes = kMiB;
    config.queue_depth = 0;
    EXPECT_EQ(make_io_engine(config).status().message(), "store queue_depth 0 is outside 1..4096");
    config.queue_depth = 32;
    EXPECT_TRUE(make_io_engine(config).is_ok());
  }
}

TEST(EngineSelect, FallsBackToPreadWhenIoUringIsUnusable) {
  const auto refused = []() { return Status::from_errno(EPERM, "io_uring_queue_init"); };
  StoreConfig config;
  config.io_engine = "auto";
  auto e = make_io_engine(config, refused);
  ASSERT_TRUE(e.is_ok());
  EXPECT_EQ((*e)->name(), "pread");
  config.io_engine = "io_uring";
  EXPECT_EQ(make_io_engine(config, refused).status().message(),
            std::string("io_engine io_uring was configured but is not usable: "
                        "io_uring_queue_init: ") +
                std::strerror(EPERM) + " (errno 1)");  // NOLINT(concurrency-mt-unsafe)
}

}  // namespace
}  // namespace stripesolve::storage
