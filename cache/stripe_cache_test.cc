#include "cache/stripe_cache.h"

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cache/test_parts.h"

namespace stripesolve::cache {
namespace {

using testing::j_request;
using testing::kPart;

// A stand-in for the scheduler's I/O role over an in-memory "disk": one double array per stripe.
class FakeIo {
 public:
  explicit FakeIo(StripeCache& cache) : cache_(cache), thread_([this] { run(); }) {}
  ~FakeIo() {
    cache_.shutdown();
    thread_.join();
  }
  std::vector<int64_t> uploads() {
    std::lock_guard<std::mutex> l(mu_);
    return uploads_;
  }
  double disk(int64_t stripe) {
    std::lock_guard<std::mutex> l(mu_);
    return disk_[stripe];
  }

 private:
  void run() {
    while (auto work = cache_.next_io_work()) {
      double* v = reinterpret_cast<double*>(work->cell.buffer);
      {
        std::lock_guard<std::mutex> l(mu_);
        if (work->kind == IoWork::Kind::kDownload) {
          for (uint64_t k = 0; k < kPart / 8; ++k) v[k] = disk_[work->cell.stripe];
        } else {
          disk_[work->cell.stripe] = v[kPart / 8 - 1];
          uploads_.push_back(work->cell.stripe);
        }
      }
      cache_.finish_io(*work, Status::ok());
    }
  }
  StripeCache& cache_;
  std::mutex mu_;
  std::map<int64_t, double> disk_;
  std::vector<int64_t> uploads_;
  std::thread thread_;
};

// Runs elim.I on stripe s (eliminating [s, s + 1)) for one J stripe that will need it: download,
// eliminate, finish; the cell is stuck until that J stripe is done with it.
void eliminate_i(StripeCache& cache, int64_t s) {
  ASSERT_TRUE(cache.request(PartRequest{s, 0, kPart, CellState::kWaitElimI, s, s + 1, 1}).is_ok());
  ASSERT_TRUE(cache.wait_for(s, CellState::kWaitElimI).is_ok());
  cache.transition(s, CellState::kElimI);
  cache.finish_elim_i(s);
}

// Runs one J-type step on the cell: wait for the download, add 1 to every value, go idle (dirty).
void update_once(StripeCache& cache, int64_t stripe) {
  CellView v = cache.request(j_request(stripe)).value();
  ASSERT_TRUE(cache.wait_for(stripe, CellState::kWaitElimJ).is_ok());
  cache.transition(stripe, CellState::kElimJ);
  double* d = reinterpret_cast<double*>(v.buffer);
  for (uint64_t k = 0; k < kPart / 8; ++k) d[k] += 1.0;
  cache.transition(stripe, CellState::kIdle);
}

TEST(StripeCacheTest, JPathDownloadsUpdatesAndMarksDirty) {
  StripeCache cache(4 * kPart);
  FakeIo io(cache);
  update_once(cache, 3);
  EXPECT_EQ(cache.state_of(3), CellState::kIdle);
  update_once(cache, 3);  // a hit: still cached
  CacheStats s = cache.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 1u);
  ASSERT_TRUE(cache.flush().is_ok());
  EXPECT_EQ(io.disk(3), 2.0);
  EXPECT_EQ(io.uploads(), std::vector<int64_t>{3});
  EXPECT_EQ(cache.stats().cells, 0u);
}

TEST(StripeCacheTest, LongestIdleIsEvictedFirstAndOnlyDirtyOnesAreUploaded) {
  StripeCache cache(3 * kPart);
  FakeIo io(cache);
  update_once(cache, 0);  // dirty, idle since t0
  ASSERT_TRUE(cache.request(PartRequest{1, 0, kPart, CellState::kStuck, 0, 0, 0}).is_ok());
  ASSERT_TRUE(cache.wait_for(1, CellState::kStuck).is_ok());
  cache.remove(1);  // DSR read: deleted without upload
  ASSERT_TRUE(cache.request(PartRequest{2, 0, kPart, CellState::kStuck, 0, 0, 0}).is_ok());
  ASSERT_TRUE(cache.wait_for(2, CellState::kStuck).is_ok());
  update_once(cache, 4);  // dirty, idle after 0
  update_once(cache, 5);  // full: evicts 0 (oldest idle, dirty, uploaded)
  EXPECT_EQ(cache.state_of(0), CellState::kAbsent);
  EXPECT_EQ(cache.state_of(2), CellState::kStuck);
  EXPECT_EQ(cache.state_of(4), CellState::kIdle);
  update_once(cache, 6);  // evicts 4, never the stuck 2
  EXPECT_EQ(cache.state_of(4), CellState::kAbsent);
  EXPECT_EQ(cache.state_of(2), CellState::kStuck);
  EXPECT_EQ(io.uploads(), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(io.disk(0), 1.0);
  // Unstuck now: 2 becomes the most recently idle cell, and it is clean.
  cache.transition(2, CellState::kIdle);
  update_once(cache, 7);  // evicts 5 (dirty)
  ASSERT_TRUE(cache.request(PartRequest{8, 0, kPart, CellState::kStuck, 0, 0, 0}).is_ok());
  ASSERT_TRUE(cache.wait_for(8, CellState::kStuck).is_ok());  // evicts 6 (dirty)
  EXPECT_EQ(cache.state_of(2), CellState::kIdle);
  ASSERT_TRUE(cache.request(PartRequest{9, 0, kPart, CellState::kStuck, 0, 0, 0}).is_ok());
  EXPECT_EQ(cache.state_of(2), CellState::kAbsent);  // clean: dropped, not uploaded
  EXPECT_EQ(io.uploads(), (std::vector<int64_t>{0, 4, 5, 6}));
  EXPECT_LE(cache.stats().peak_bytes, cache.stats().budget);
}

TEST(StripeCacheTest, StuckPartsAreNeverEvictedAndAFullStuckCacheFails) {
  StripeCache cache(2 * kPart);
  FakeIo io(cache);
  for (int64_t s : {0, 1}) {
    ASSERT_NO_FATAL_FAILURE(eliminate_i(cache, s));
    EXPECT_EQ(cache.state_of(s), CellState::kStuck);
  }
  auto r = cache.request(j_request(2));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(),
            "cache: stripe 2 needs 8192 bytes but the budget of 16384 bytes holds 16384 bytes of "
            "parts none of which can be evicted (0 stuck, 1 stuck)");
  cache.release_use(0);  // count 1 -> 0: unstuck
  EXPECT_EQ(cache.state_of(0), CellState::kIdle);
  EXPECT_TRUE(cache.request(j_request(2)).is_ok());
  EXPECT_EQ(cache.state_of(0), CellState::kAbsent);
}

// A reserved block (the residual's copy of A) comes from the top of the arena, counts as in
// use, is never evicted, and the cells have what is left until it is given back.
TEST(StripeCacheTest, AReservedBlockTakesItsShareUntilGivenBack) {
  StripeCache cache(3 * kPart);
  FakeIo io(cache);
  EXPECT_EQ(cache.reserve(4 * kPart), nullptr);  // more than the budget
  std::byte* block = cache.reserve(kPart);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(cache.reserved_bytes(), kPart);
  EXPECT_EQ(cache.stats().bytes_in_use, kPart);
  for (int64_t s : {0, 1}) ASSERT_NO_FATAL_FAILURE(eliminate_i(cache, s));
  EXPECT_EQ(block, cache.arena().base() + 2 * kPart);  // the top: the cells below it
  auto r = cache.request(j_request(2));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(),
            "cache: stripe 2 needs 8192 bytes but the budget of 24576 bytes holds 16384 bytes of "
            "parts none of which can be evicted (0 stuck, 1 stuck) and 8192 bytes reserved");
  cache.unreserve(block);
  EXPECT_EQ(cache.reserved_bytes(), 0u);
  EXPECT_TRUE(cache.request(j_request(3)).is_ok());
  EXPECT_LE(cache.stats().peak_bytes, cache.stats().budget);
}

// What the GPU tier pins: the span below the reserved blocks at the arena's top, where every
// cell lies; the whole arena where a hole lies above a reserved block (a cell could go there).
TEST(StripeCacheTest, TheCellsSpanEndsWhereTheReservedTopBegins) {
  StripeCache cache(4 * kPart);
  EXPECT_EQ(cache.cells_span(), 4 * kPart);
  std::byte* top = cache.reserve(kPart);
  std::byte* below = cache.reserve(kPart);
  ASSERT_NE(top, nullptr);
  ASSERT_NE(below, nullptr);
  EXPECT_EQ(cache.cells_span(), 2 * kPart);
  cache.unreserve(top);
  EXPECT_EQ(cache.cells_span(), 4 * kPart);  // a hole above `below`
  cache.unreserve(below);
  EXPECT_EQ(cache.cells_span(), 4 * kPart);
}

TEST(StripeCacheTest, TooLargeRequestIsRejected) {
  StripeCache cache(kPart);
  auto r = cache.request(PartRequest{0, 0, 2 * kPart, CellState::kWaitElimJ, 0, 1, 0});
  EXPECT_EQ(r.status().message(),
            "cache: stripe 0 needs 16384 bytes, more than the budget of 8192 bytes");
}

TEST(StripeCacheTest, WaitersAreWokenByTransitionsAndByFailure) {
  StripeCache cache(2 * kPart);
  FakeIo io(cache);
  ASSERT_TRUE(cache.request(PartRequest{0, 0, kPart, CellState::kWaitElimI, 0, 1, 1}).is_ok());
  std::thread waiter([&] { EXPECT_TRUE(cache.wait_for(0, CellState::kStuck).is_ok()); });
  ASSERT_TRUE(cache.wait_for(0, CellState::kWaitElimI).is_ok());
  cache.transition(0, CellState::kElimI);
  cache.finish_elim_i(0);
  waiter.join();
  std::thread failed(
      [&] { EXPECT_EQ(cache.wait_for(0, CellState::kElimJ).status().message(), "stop"); });
  cache.fail(Status::cancelled("stop"));
  failed.join();
}

TEST(StripeCacheDeathTest, IllegalTransitionIsAnInternalError) {
  StripeCache cache(2 * kPart);
  ASSERT_TRUE(cache.request(j_request(0)).is_ok());
  EXPECT_DEATH(cache.transition(0, CellState::kIdle),
               "illegal transition of stripe 0 from wait_download to idle");
  EXPECT_DEATH(cache.transition(5, CellState::kIdle), "stripe 5 has no cell");
}

// Several requesters over a cache that holds a third of the parts: the budget is never exceeded,
// every update survives eviction and write-back.
TEST(StripeCacheTest, ConcurrentRequestsStayWithinBudgetAndKeepEveryUpdate) {
  constexpr int kThreads = 4;
  constexpr int kStripesPerThread = 6;
  constexpr int kRounds = 5;
  StripeCache cache(8 * kPart);
  FakeIo io(cache);
  std::atomic<uint64_t> max_seen{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        for (int k = 0; k < kStripesPerThread; ++k) {
          update_once(cache, t * kStripesPerThread + k);
          const uint64_t used = cache.stats().bytes_in_use;
          uint64_t prev = max_seen.load();
          while (used > prev && !max_seen.compare_exchange_weak(prev, used)) {
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(cache.flush().is_ok());
  for (int s = 0; s < kThreads * kStripesPerThread; ++s) EXPECT_EQ(io.disk(s), kRounds) << s;
  const CacheStats st = cache.stats();
  EXPECT_LE(st.peak_bytes, st.budget);
  EXPECT_LE(max_seen.load(), st.budget);
  EXPECT_GT(st.uploads, 0u);
}

TEST(StripeCacheTest, FinishElimJReleasesTheIStripesAndIdlesJTogether) {
  StripeCache cache(4 * kPart);
  FakeIo io(cache);
  for (int64_t s : {0, 1}) {
    ASSERT_NO_FATAL_FAILURE(eliminate_i(cache, s));
  }
  ASSERT_TRUE(cache.request(PartRequest{2, 0, kPart, CellState::kWaitElimJ, 0, 2, 0}).is_ok());
  ASSERT_TRUE(cache.wait_for(2, CellState::kWaitElimJ).is_ok());
  cache.transition(2, CellState::kElimJ);
  cache.finish_elim_j(2, 0, 2);
  EXPECT_EQ(cache.state_of(0), CellState::kIdle);
  EXPECT_EQ(cache.state_of(1), CellState::kIdle);
  EXPECT_EQ(cache.state_of(2), CellState::kIdle);
}

// A J whose values only the device keeps gives its RAM back: the memory serves another part
// meanwhile, a J update takes the part as it is (no buffer, no download), and its elimination
// gets a new extent, again without a download.
TEST(StripeCacheTest, APartKeptOnlyOnTheDeviceGivesItsMemoryBackUntilItsElimination) {
  StripeCache cache(2 * kPart);
  FakeIo io(cache);
  ASSERT_NO_FATAL_FAILURE(eliminate_i(cache, 0));  // stuck: J = 1 needs it
  ASSERT_TRUE(cache.request(PartRequest{1, 0, kPart, CellState::kWaitElimJ, 0, 1, 0}).is_ok());
  ASSERT_TRUE(cache.wait_for(1, CellState::kWaitElimJ).is_ok());
  cache.transition(1, CellState::kElimJ);
  cache.finish_elim_j(1, 0, 1, UpdatedJ::kOnDeviceOnly);
  EXPECT_EQ(cache.state_of(1), CellState::kOnDevice);
  EXPECT_EQ(cache.on_device_bytes(), 0u);
  EXPECT_EQ(cache.stats().bytes_in_use, kPart);  // stripe 0 alone
  const uint64_t misses = cache.stats().misses;

  // Its memory holds stripe 2 meanwhile, beside stripe 0 (idle now).
  ASSERT_TRUE(cache.request(PartRequest{2, 0, kPart, CellState::kWaitElimJ, 0, 1, 0}).is_ok());
  ASSERT_TRUE(cache.wait_for(2, CellState::kWaitElimJ).is_ok());
  EXPECT_EQ(cache.stats().bytes_in_use, 2 * kPart);

  // A J update: a hit without memory.
  auto j = cache.try_hit(PartRequest{1, 0, kPart, CellState::kWaitElimJ, 0, 1, 0});
  ASSERT_TRUE(j.has_value());
  EXPECT_EQ(j->buffer, nullptr);
  cache.transition(1, CellState::kElimJ);
  cache.finish_elim_j(1, 0, 0, UpdatedJ::kOnDeviceOnly);
  EXPECT_EQ(cache.state_of(1), CellState::kOnDevice);

  // The elimination needs memory: not a try_hit; request() evicts for it and downloads nothing.
  const PartRequest elim{1, 0, kPart, CellState::kWaitElimI, 1, 2, 0};
  EXPECT_FALSE(cache.try_hit(elim).has_value());
  cache.transition(2, CellState::kElimJ);
  cache.finish_elim_j(2, 0, 0);  // idle, evictable
  auto i = cache.request(elim);
  ASSERT_TRUE(i.is_ok()) << i.status().to_string();
  EXPECT_NE(i->buffer, nullptr);
  EXPECT_EQ(cache.state_of(1), CellState::kWaitElimI);
  EXPECT_EQ(cache.stats().misses, misses + 1);  // stripe 2's only
  EXPECT_LE(cache.stats().peak_bytes, 2 * kPart);
}

// Where the elimination's final values stay on the device (PartRequest::final_on_device), a
// part only the device holds is a hit for its elimination without memory, even with the arena
// full: the master hands it out while the front's miss waits for memory.
TEST(StripeCacheTest, AnEliminationKeepingItsValuesOnTheDeviceNeedsNoMemory) {
  StripeCache cache(2 * kPart);
  FakeIo io(cache);
  ASSERT_TRUE(cache.request(PartRequest{1, 0, kPart, CellState::kWaitElimJ, 0, 1, 0}).is_ok());
  ASSERT_TRUE(cache.wait_for(1, CellState::kWaitElimJ).is_ok());
  cache.transition(1, CellState::kElimJ);
  cache.finish_elim_j(1, 0, 0, UpdatedJ::kOnDeviceOnly);
  ASSERT_EQ(cache.state_of(1), CellState::kOnDevice);
  // The arena full with two parts waiting for their updates.
  for (int64_t s : {2, 3}) {
    ASSERT_TRUE(cache.request(PartRequest{s, 0, kPart, CellState::kWaitElimJ, 0, 1, 0}).is_ok());
    ASSERT_TRUE(cache.wait_for(s, CellState::kWaitElimJ).is_ok());
  }
  ASSERT_EQ(cache.stats().bytes_in_use, 2 * kPart);
  PartRequest elim{1, 0, kPart, CellState::kWaitElimI, 1, 2, 0};
  EXPECT_FALSE(cache.try_hit(elim).has_value()) << "final values back to RAM: needs memory";
  elim.final_on_device = true;
  auto i = cache.try_hit(elim);
  ASSERT_TRUE(i.has_value());
  EXPECT_EQ(i->buffer, nullptr);
  EXPECT_EQ(cache.state_of(1), CellState::kWaitElimI);
  cache.transition(1, CellState::kElimI);
  cache.finish_elim_i_on_device(1);
  EXPECT_EQ(cache.state_of(1), CellState::kAbsent);  // read by no J
  EXPECT_EQ(cache.stats().bytes_in_use, 2 * kPart);
  EXPECT_LE(cache.stats().peak_bytes, 2 * kPart);
  for (int64_t s : {2, 3}) {
    cache.transition(s, CellState::kElimJ);
    cache.finish_elim_j(s, 0, 0);
  }
  ASSERT_TRUE(cache.flush().is_ok());
}

// An eliminated stripe whose final values stay on the device only gives its memory back at
// once, stays stuck for the J stripe that reads it, then leaves the cache without a write; one
// that no J reads leaves at once.
TEST(StripeCacheTest, AStripeFinalOnTheDeviceOnlyLeavesWithoutAWrite) {
  StripeCache cache(2 * kPart);
  FakeIo io(cache);
  ASSERT_TRUE(cache.request(PartRequest{0, 0, kPart, CellState::kWaitElimI, 0, 1, 1}).is_ok());
  ASSERT_TRUE(cache.wait_for(0, CellState::kWaitElimI).is_ok());
  cache.transition(0, CellState::kElimI);
  cache.finish_elim_i_on_device(0);
  EXPECT_EQ(cache.state_of(0), CellState::kStuck);
  EXPECT_EQ(cache.stats().bytes_in_use, 0u);
  // J = 1 reads it (on the device), and its last use drops the cell.
  ASSERT_TRUE(cache.request(PartRequest{1, 0, kPart, CellState::kWaitElimJ, 0, 1, 0}).is_ok());
  ASSERT_TRUE(cache.wait_for(1, CellState::kWaitElimJ).is_ok());
  cache.transition(1, CellState::kElimJ);
  cache.finish_elim_j(1, 0, 1);
  EXPECT_EQ(cache.state_of(0), CellState::kAbsent);
  // Stripe 1's elimination, read by nobody: gone at once.
  ASSERT_TRUE(cache.request(PartRequest{1, 0, kPart, CellState::kWaitElimI, 1, 2, 0}).is_ok());
  cache.transition(1, CellState::kElimI);
  cache.finish_elim_i_on_device(1);
  EXPECT_EQ(cache.state_of(1), CellState::kAbsent);
  EXPECT_EQ(cache.stats().bytes_in_use, 0u);
  ASSERT_TRUE(cache.flush().is_ok());
  EXPECT_TRUE(io.uploads().empty());
}

// DSR parts are stuck only until their reader removes them: a request that does not fit waits
// for the reader instead of failing.
TEST(StripeCacheTest, DsrRequestWaitsForTheReaderToRemoveParts) {
  StripeCache cache(2 * kPart);
  FakeIo io(cache);
  std::thread dsr([&] {
    for (int64_t s = 0; s < 6; ++s) {
      EXPECT_TRUE(cache.request(PartRequest{s, 0, kPart, CellState::kStuck, 0, 0, 0}).is_ok());
    }
  });
  for (int64_t s = 0; s < 6; ++s) {
    ASSERT_TRUE(cache.wait_for(s, CellState::kStuck).is_ok());
    cache.remove(s);
  }
  dsr.join();
  EXPECT_LE(cache.stats().peak_bytes, 2 * kPart);
  EXPECT_EQ(cache.stats().misses, 6u);
}

TEST(StripeCacheTest, WriteBackKeepsPartsCachedAndClean) {
  StripeCache cache(4 * kPart);
  FakeIo io(cache);
  update_once(cache, 0);
  update_once(cache, 1);
  ASSERT_TRUE(cache.write_back().is_ok());
  EXPECT_EQ(io.uploads(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(io.disk(0), 1.0);
  EXPECT_EQ(cache.state_of(0), CellState::kIdle);
  EXPECT_EQ(cache.state_of(1), CellState::kIdle);
  // A DSR read hits the kept cell and releases it back to idle.
  ASSERT_TRUE(cache.request(PartRequest{0, 0, kPart, CellState::kStuck, 0, 0, 0}).is_ok());
  EXPECT_EQ(cache.state_of(0), CellState::kStuck);
  cache.release_read(0);
  EXPECT_EQ(cache.state_of(0), CellState::kIdle);
  EXPECT_EQ(cache.stats().hits, 1u);
  // Clean now: a flush drops them without uploading again.
  ASSERT_TRUE(cache.flush().is_ok());
  EXPECT_EQ(io.uploads().size(), 2u);
}

TEST(StripeCacheTest, TryHitNeverWaitsOrAllocates) {
  StripeCache cache(4 * kPart);
  FakeIo io(cache);
  EXPECT_FALSE(cache.try_hit(j_request(0)));  // absent: no download started
  EXPECT_EQ(cache.stats().cells, 0u);
  update_once(cache, 0);
  ASSERT_TRUE(cache.try_hit(j_request(0)));  // idle: a hit, now waiting for elim.J
  EXPECT_EQ(cache.state_of(0), CellState::kWaitElimJ);
  EXPECT_FALSE(cache.try_hit(j_request(0)));  // busy
  cache.transition(0, CellState::kElimJ);
  cache.transition(0, CellState::kIdle);
  EXPECT_FALSE(cache.try_hit(j_request(0, -1)));  // stored from a later column than asked
  EXPECT_EQ(cache.stats().hits, 1u);
}

// A read-ahead downloads a part into free memory and leaves it idle and clean, a hit for the
// task's request later; it never starts where the stripe has a cell, nor evicts or waits for
// memory.
TEST(StripeCacheTest, AReadAheadEndsIdleAndCleanAndNeverEvicts) {
  StripeCache cache(2 * kPart);
  FakeIo io(cache);
  ASSERT_TRUE(cache.read_ahead(j_request(0)));
  ASSERT_TRUE(cache.wait_for(0, CellState::kIdle).is_ok());
  EXPECT_FALSE(cache.read_ahead(j_request(0)));  // it has a cell
  EXPECT_EQ(cache.stats().misses, 1u);
  auto hit = cache.try_hit(j_request(0));
  ASSERT_TRUE(hit.has_value());
  EXPECT_FALSE(hit->dirty);
  EXPECT_EQ(cache.state_of(0), CellState::kWaitElimJ);
  EXPECT_EQ(cache.stats().hits, 1u);
  cache.transition(0, CellState::kElimJ);
  cache.transition(0, CellState::kIdle);
  ASSERT_TRUE(cache.read_ahead(j_request(1)));
  ASSERT_TRUE(cache.wait_for(1, CellState::kIdle).is_ok());
  // The cache is full of idle parts: no room without an eviction, so none is read ahead.
  EXPECT_FALSE(cache.read_ahead(j_request(2)));
  EXPECT_EQ(cache.state_of(0), CellState::kIdle);
  EXPECT_EQ(cache.state_of(1), CellState::kIdle);
  EXPECT_EQ(cache.stats().evictions, 0u);
  cache.fail(Status::internal("stop"));
  EXPECT_FALSE(cache.read_ahead(j_request(3)));  // nor after a failure
}

// try_request() until it returns a cell, waiting for a change in between.
CellView try_request_until_served(StripeCache& cache, const PartRequest& req, StripeRange spared) {
  for (;;) {
    const uint64_t seen = cache.changes();
    auto r = cache.try_request(req, spared);
    EXPECT_TRUE(r.is_ok());
    if (!r.is_ok()) return {};
    if (*r) return **r;
    EXPECT_TRUE(cache.wait_change(seen).is_ok());
  }
}

// try_request() returns where request() would wait and goes on from there when called again;
// the spared stripe is evicted only when nothing in flight could return memory instead.
TEST(StripeCacheTest, TryRequestNeverWaitsAndSparesAStripeWhileMemoryComesBack) {
  StripeCache cache(3 * kPart);
  FakeIo io(cache);
  update_once(cache, 0);  // offsets 0, 1, 2 parts: stripes 0, 1, 2
  update_once(cache, 1);
  eliminate_i(cache, 2);                     // stuck until a J is done with it
  ASSERT_TRUE(cache.try_hit(j_request(1)));  // J = 1 handed out: its memory comes back later
  // Full: 0 idle, 1 busy, 2 stuck. With 0 spared nothing is evicted and nothing waited for.
  auto r = cache.try_request(j_request(3), /*spared=*/{0, 1});
  ASSERT_TRUE(r.is_ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(cache.state_of(0), CellState::kIdle);
  EXPECT_EQ(cache.stats().cells, 3u);
  // Room beside a pinned stripe: 1 comes back (one part); 0 and 1 are neighbours (two).
  EXPECT_TRUE(cache.fits_beside(kPart, 0));
  EXPECT_FALSE(cache.fits_beside(2 * kPart, 0));
  EXPECT_TRUE(cache.fits_beside(2 * kPart, 2));
  // J = 1 done: it is the victim (written back first), the spared 0 stays.
  cache.transition(1, CellState::kElimJ);
  cache.transition(1, CellState::kIdle);
  try_request_until_served(cache, j_request(3), /*spared=*/{0, 1});
  EXPECT_EQ(cache.state_of(0), CellState::kIdle);
  EXPECT_EQ(cache.state_of(1), CellState::kAbsent);
  EXPECT_EQ(io.uploads(), std::vector<int64_t>{1});
  // Nothing in flight once J = 3 is done: the spared stripe goes when nothing else can.
  ASSERT_TRUE(cache.wait_for(3, CellState::kWaitElimJ).is_ok());
  cache.transition(3, CellState::kElimJ);
  cache.transition(3, CellState::kIdle);
  try_request_until_served(cache, j_request(4), /*spared=*/{3, 4});  // 0 is the longest idle
  EXPECT_EQ(cache.state_of(0), CellState::kAbsent);
  EXPECT_EQ(cache.state_of(3), CellState::kIdle);
  ASSERT_TRUE(cache.wait_for(4, CellState::kWaitElimJ).is_ok());
  cache.transition(4, CellState::kElimJ);
  cache.transition(4, CellState::kIdle);
  ASSERT_TRUE(cache.try_hit(j_request(4)));  // 4 busy, 2 stuck: only 3, the spared one
  r = cache.try_request(j_request(5), /*spared=*/{3, 4});
  ASSERT_TRUE(r.is_ok());
  EXPECT_FALSE(*r);  // 4 in flight: wait for it rather than evict 3
  EXPECT_EQ(cache.state_of(3), CellState::kIdle);
  cache.transition(4, CellState::kElimJ);
  cache.transition(4, CellState::kIdle);
  EXPECT_LE(cache.stats().peak_bytes, cache.stats().budget);
}

// The spared stripe is the victim when nothing is in flight.
TEST(StripeCacheTest, ASparedStripeGoesWhenNothingElseCanMakeRoom) {
  StripeCache cache(2 * kPart);
  FakeIo io(cache);
  update_once(cache, 0);
  eliminate_i(cache, 1);
  try_request_until_served(cache, j_request(2), /*spared=*/{0, 1});
  EXPECT_EQ(cache.state_of(0), CellState::kAbsent);
  EXPECT_EQ(io.uploads(), std::vector<int64_t>{0});
}

// A range of spared stripes (the next elimination's meta-stripe): the others go first, whatever
// their age; then the latest spared stripe, the one the chain reaches last.
TEST(StripeCacheTest, SparedStripesGoLastAndTheLatestOfThemFirst) {
  StripeCache cache(4 * kPart);
  FakeIo io(cache);
  update_once(cache, 1);  // the longest idle
  update_once(cache, 2);
  update_once(cache, 0);
  update_once(cache, 3);
  try_request_until_served(cache, j_request(4), /*spared=*/{1, 3});
  EXPECT_EQ(cache.state_of(0), CellState::kAbsent);  // the longest idle outside [1, 3)
  try_request_until_served(cache, j_request(5), /*spared=*/{1, 3});
  EXPECT_EQ(cache.state_of(3), CellState::kAbsent);
  EXPECT_EQ(cache.state_of(1), CellState::kIdle);
  EXPECT_EQ(cache.state_of(2), CellState::kIdle);
  EXPECT_EQ(io.uploads(), (std::vector<int64_t>{0, 3}));
}

// Nothing else evictable and nothing in flight: the latest spared stripe goes, not the longest
// idle one (the chain reaches it last).
TEST(StripeCacheTest, TheLatestSparedStripeGoesFirst) {
  StripeCache cache(3 * kPart);
  FakeIo io(cache);
  update_once(cache, 1);
  update_once(cache, 2);
  eliminate_i(cache, 0);
  try_request_until_served(cache, j_request(3), /*spared=*/{1, 3});
  EXPECT_EQ(cache.state_of(2), CellState::kAbsent);
  EXPECT_EQ(cache.state_of(1), CellState::kIdle);
  EXPECT_EQ(io.uploads(), std::vector<int64_t>{2});
}

PartRequest dsr_columns(int64_t stripe, int64_t col_begin, int64_t col_end) {
  PartRequest req{stripe, col_begin, kPart, CellState::kStuck, 0, 0, 0};
  req.col_end = col_end;
  return req;
}

TEST(StripeCacheTest, APartServesTheColumnsItHolds) {
  StripeCache cache(4 * kPart);
  FakeIo io(cache);
  // A prefix [0, 40) as the forward passes read it.
  ASSERT_TRUE(cache.request(dsr_columns(0, 0, 40)).is_ok());
  const CellView prefix = cache.wait_for(0, CellState::kStuck).value();
  EXPECT_EQ(prefix.i0_store, 0);
  EXPECT_EQ(prefix.i1_store, 40);
  cache.release_read(0);
  // Inside it: a hit.
  ASSERT_TRUE(cache.request(dsr_columns(0, 8, 40)).is_ok());
  cache.release_read(0);
  EXPECT_EQ(cache.stats().hits, 1u);
  // Past its end (the backward pass's suffix, or a J update through n): the idle prefix is
  // dropped and the part read again.
  EXPECT_FALSE(cache.try_hit(dsr_columns(0, 8, 41)));
  ASSERT_TRUE(cache.request(dsr_columns(0, 8, kThroughN)).is_ok());
  const CellView suffix = cache.wait_for(0, CellState::kStuck).value();
  EXPECT_EQ(suffix.i0_store, 8);
  EXPECT_EQ(suffix.i1_store, kThroughN);
  cache.release_read(0);
  EXPECT_EQ(cache.stats().misses, 2u);
  // A part through n serves any range that starts at or after its first column.
  EXPECT_TRUE(cache.try_hit(dsr_columns(0, 8, 12)));
  cache.release_read(0);
  EXPECT_FALSE(cache.try_hit(j_request(0, 7)));
  EXPECT_EQ(cache.stats().hits, 2u);
}

}  // namespace
}  // namespace stripesolve::cache
