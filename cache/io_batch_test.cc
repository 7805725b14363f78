// StripeCache::next_io_batch: an upload alone, else the oldest waiting downloads up to the cap;
// a batch whose cells are reported one by one (some failed) fails the cache once per failed cell;
// a streaming I/O thread under concurrent requesters keeps every update.
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cache/stripe_cache.h"
#include "cache/test_parts.h"

namespace stripesolve::cache {
namespace {

using testing::j_request;
using testing::kPart;

std::vector<int64_t> stripes_of(const std::vector<IoWork>& batch, IoWork::Kind kind) {
  std::vector<int64_t> out;
  for (const IoWork& w : batch) {
    EXPECT_EQ(w.kind, kind);
    out.push_back(w.cell.stripe);
  }
  return out;
}

TEST(IoBatchTest, UploadComesAloneThenTheOldestDownloadsUpToTheCap) {
  StripeCache cache(4 * kPart);
  // Stripe 0 downloaded by hand, updated: idle and dirty.
  ASSERT_TRUE(cache.request(j_request(0)).is_ok());
  std::vector<IoWork> first = cache.next_io_batch(16);
  ASSERT_EQ(stripes_of(first, IoWork::Kind::kDownload), std::vector<int64_t>{0});
  cache.finish_io(first[0], Status::ok());
  cache.transition(0, CellState::kElimJ);
  cache.transition(0, CellState::kIdle);
  // Requested out of stripe order: the batch follows request order.
  for (int64_t s : {3, 1, 2}) ASSERT_TRUE(cache.request(j_request(s)).is_ok());
  // The cache is full: this request evicts stripe 0 (an upload) and waits for its memory.
  std::thread requester([&] { EXPECT_TRUE(cache.request(j_request(4)).is_ok()); });
  ASSERT_TRUE(cache.wait_for(0, CellState::kWaitUpload).is_ok());
  const std::vector<IoWork> upload = cache.next_io_batch(16);
  ASSERT_EQ(stripes_of(upload, IoWork::Kind::kUpload), std::vector<int64_t>{0});
  EXPECT_EQ(cache.state_of(3), CellState::kWaitDownload);  // nothing else was taken
  cache.finish_io(upload[0], Status::ok());
  requester.join();
  const std::vector<IoWork> capped = cache.next_io_batch(2);
  EXPECT_EQ(stripes_of(capped, IoWork::Kind::kDownload), (std::vector<int64_t>{3, 1}));
  const std::vector<IoWork> rest = cache.next_io_batch(16);
  EXPECT_EQ(stripes_of(rest, IoWork::Kind::kDownload), (std::vector<int64_t>{2, 4}));
  for (int64_t s : {3, 1, 2, 4}) EXPECT_EQ(cache.state_of(s), CellState::kDownloading) << s;
  // Reported out of order: each cell moves on its own.
  cache.finish_io(rest[1], Status::ok());
  EXPECT_EQ(cache.state_of(4), CellState::kWaitElimJ);
  EXPECT_EQ(cache.state_of(2), CellState::kDownloading);
  for (const IoWork& w : capped) cache.finish_io(w, Status::ok());
  cache.finish_io(rest[0], Status::ok());
  for (int64_t s : {1, 2, 3, 4}) EXPECT_EQ(cache.state_of(s), CellState::kWaitElimJ) << s;
  EXPECT_EQ(cache.stats().failed_transfers, 0u);
  cache.shutdown();
  EXPECT_TRUE(cache.next_io_batch(16).empty());
}

TEST(IoBatchTest, FailedCellsOfABatchFailTheCacheOncePerCell) {
  StripeCache cache(4 * kPart);
  for (int64_t s : {0, 1, 2}) ASSERT_TRUE(cache.request(j_request(s)).is_ok());
  const std::vector<IoWork> batch = cache.next_io_batch(16);
  ASSERT_EQ(batch.size(), 3u);
  cache.finish_io(batch[0], Status::ok());
  const Status error = Status::io_error("read failed");
  cache.finish_io(batch[1], error);
  cache.finish_io(batch[2], error);
  EXPECT_EQ(cache.state_of(0), CellState::kWaitElimJ);
  EXPECT_EQ(cache.state_of(1), CellState::kDownloading);  // the job is over; the cell stays
  EXPECT_EQ(cache.stats().failed_transfers, 2u);
  EXPECT_EQ(cache.failure().message(), "read failed");
  EXPECT_EQ(cache.wait_for(2, CellState::kWaitElimJ).status().message(), "read failed");
  EXPECT_TRUE(cache.next_io_batch(16).empty());
}

// An I/O thread that takes batches of up to 4 downloads over an in-memory disk (one value per
// stripe), reporting each cell separately; requesters update parts over a small cache.
TEST(IoBatchTest, StreamingIoThreadKeepsEveryUpdateUnderConcurrentRequesters) {
  constexpr int kThreads = 3;
  constexpr int kStripesPerThread = 5;
  constexpr int kRounds = 4;
  StripeCache cache(6 * kPart);
  std::mutex disk_mu;
  std::map<int64_t, double> disk;
  std::thread io([&] {
    for (;;) {
      const std::vector<IoWork> batch = cache.next_io_batch(4);
      if (batch.empty()) return;
      for (const IoWork& w : batch) {
        double* v = reinterpret_cast<double*>(w.cell.buffer);
        {
          std::lock_guard<std::mutex> l(disk_mu);
          if (w.kind == IoWork::Kind::kDownload) {
            for (uint64_t k = 0; k < kPart / 8; ++k) v[k] = disk[w.cell.stripe];
          } else {
            disk[w.cell.stripe] = v[0];
          }
        }
        cache.finish_io(w, Status::ok());
      }
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        for (int k = 0; k < kStripesPerThread; ++k) {
          const int64_t s = t * kStripesPerThread + k;
          const CellView v = cache.request(j_request(s)).value();
          ASSERT_TRUE(cache.wait_for(s, CellState::kWaitElimJ).is_ok());
          cache.transition(s, CellState::kElimJ);
          double* d = reinterpret_cast<double*>(v.buffer);
          for (uint64_t i = 0; i < kPart / 8; ++i) d[i] += 1.0;
          cache.transition(s, CellState::kIdle);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(cache.flush().is_ok());
  cache.shutdown();
  io.join();
  for (int s = 0; s < kThreads * kStripesPerThread; ++s) EXPECT_EQ(disk[s], kRounds) << s;
  EXPECT_GT(cache.stats().uploads, 0u);
  EXPECT_LE(cache.stats().peak_bytes, cache.stats().budget);
}

}  // namespace
}  // namespace stripesolve::cache
