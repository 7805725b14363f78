// The I/O role streams every waiting download: parts queued together are read as one read_parts
// stream per source object (copy on first write splits a batch), each reported to the cache as it
// arrives; a read error reaches every part not yet reported, once. Real stores in temp dirs.
#include "scheduler/io_role.h"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "storage/checksum.h"
#include "storage/engine_select.h"
#include "storage/fault_engine.h"
#include "storage/generators.h"
#include "storage/matrix_store.h"

namespace stripesolve::scheduler {
namespace {

// Forwards to an inner engine and counts read_parts streams (run_batches calls); hold() makes the
// next stream wait for release(), so that the test can queue downloads behind it.
class GateEngine final : public storage::IoEngine {
 public:
  explicit GateEngine(std::shared_ptr<storage::IoEngine> inner) : inner_(std::move(inner)) {}
  std::string_view name() const override { return "gate"; }
  using IoEngine::run;
  Status run(std::span<const storage::IoRequest> requests,
             const storage::IoCompletion& on_complete) override {
    return inner_->run(requests, on_complete);
  }
  Status run_batches(storage::IoBatchSource& source) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++streams_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return !held_; });
    }
    return inner_->run_batches(source);
  }
  void hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    changed_.notify_all();
  }
  void wait_for_streams(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return streams_ >= n; });
  }
  int streams() {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_;
  }

 private:
  std::shared_ptr<storage::IoEngine> inner_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool held_ = false;  // guarded by mu_
  int streams_ = 0;    // guarded by mu_
};

constexpr int64_t kN = 400;  // 7 stripes of S = 64 (the last one 16 rows)
constexpr int64_t kS = 64;
storage::GeneratorSpec uniform_spec() {
  return {"uniform", 5};
}

class IoRoleTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "io_uring" && !storage::io_uring_usable().is_ok()) {
      GTEST_SKIP() << "io_uring unavailable: " << storage::io_uring_usable().message();
    }
    static std::atomic<int> counter{0};
    root_ = ::testing::TempDir() + "/io_role_test." + std::to_string(::getpid()) + "." +
            std::to_string(counter++);
    std::filesystem::remove_all(root_);
    config_.paths = {root_ + "/ssd0", root_ + "/ssd1"};
    config_.stripe_rows = kS;
    config_.round_robin_levels = 3;
    config_.min_segment_bytes = 4096;
    config_.free_space_reserve = 0;
    config_.import_buffer = 1 << 20;
    config_.io_engine = GetParam();
    auto clean = storage::MatrixStore::open(config_).value();
    ASSERT_TRUE(clean->create_generated("A", kN, uniform_spec(), kS).is_ok());
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(root_);
  }

  // Reopens the store over the gate (and a fault engine below it when `fault` is given).
  void open_gated(const storage::FaultPlan* fault = nullptr) {
    std::shared_ptr<storage::IoEngine> inner = storage::make_io_engine(config_).value();
    if (fault != nullptr) {
      fault_ = std::make_shared<storage::FaultEngine>(inner, *fault);
      inner = fault_;
    }
    gate_ = std::make_shared<GateEngine>(inner);
    store_ = storage::MatrixStore::open(config_, gate_).value();
  }

  static cache::PartRequest request_of(const storage::StripedMatrix& m, int64_t stripe,
                                       int64_t col) {
    return cache::PartRequest{
        stripe, col, m.part_layout(stripe, col).buffer_bytes, cache::CellState::kWaitElimJ, 0,
        1,      0};
  }

  // Requests stripe `first`, holds its stream in the engine, queues `rest` behind it and lets
  // everything go: the role reads `first` alone and then `rest` as one batch.
  void queue_behind_one(cache::StripeCache& cache, const storage::StripedMatrix& m, int64_t first,
                        const std::vector<int64_t>& rest, int64_t col_step) {
    const int before = gate_->streams();
    gate_->hold();
    ASSERT_TRUE(cache.request(request_of(m, first, first * col_step)).is_ok());
    gate_->wait_for_streams(before + 1);
    for (int64_t s : rest) ASSERT_TRUE(cache.request(request_of(m, s, s * col_step)).is_ok());
    gate_->release();
  }

  // Whether the cell holds part (stripe, col) with element (r, c) = value(r, c).
  template <typename Value>
  static bool holds(const storage::StripedMatrix& m, const cache::CellView& cell, Value value) {
    const storage::StripeGeometry& g = m.geometry();
    const storage::PartLayout layout = m.part_layout(cell.stripe, cell.i0_store);
    const int64_t h = g.rows(cell.stripe);
    for (int64_t c = cell.i0_store; c < g.n; ++c) {
      for (int64_t r = 0; r < h; ++r) {
        double v = 0;
        std::memcpy(&v, cell.buffer + layout.data_offset + 8 * ((c - cell.i0_store) * h + r), 8);
        if (v != value(g.row_begin(cell.stripe) + r, c)) return false;
      }
    }
    return true;
  }
  static double generated(int64_t r, int64_t c) {
    return storage::generated_value(uniform_spec(), kN, r, c);
  }

  // What the copy-on-first-write tests run on (after open_gated()): A, its factor F, a 64 MiB
  // cache and an I/O role that reads A and writes F.
  struct FactorIo {
    explicit FactorIo(storage::MatrixStore& store)
        : a(store.open_matrix("A").value()),
          f(store.create_factor("F", *a).value()),
          io(cache, progress, nullptr) {
      io.set_sources(a.get(), f.get());
    }
    std::unique_ptr<storage::StripedMatrix> a;
    std::unique_ptr<storage::StripedMatrix> f;
    cache::StripeCache cache{64 << 20};
    ProgressMeter progress{nullptr, 1.0};
    IoRole io;
  };

  std::string root_;
  storage::StoreConfig config_;
  std::shared_ptr<storage::FaultEngine> fault_;
  std::shared_ptr<GateEngine> gate_;
  std::unique_ptr<storage::MatrixStore> store_;
};

TEST_P(IoRoleTest, WaitingDownloadsAreOneStreamAndEachPartArrivesOnce) {
  open_gated();
  auto a = store_->open_matrix("A").value();
  cache::StripeCache cache(64 << 20);
  ProgressMeter progress(nullptr, 1.0);
  TraceRecorder trace;
  IoRole io(cache, progress, &trace);
  io.set_sources(a.get(), nullptr);
  const int before = gate_->streams();
  queue_behind_one(cache, *a, 0, {1, 2, 3, 4, 5, 6}, /*col_step=*/7);
  uint64_t bytes = 0;
  for (int64_t s = 0; s < 7; ++s) {
    auto cell = cache.wait_for(s, cache::CellState::kWaitElimJ);
    ASSERT_TRUE(cell.is_ok()) << cell.status().to_string();
    EXPECT_EQ(cell->i0_store, 7 * s);
    EXPECT_TRUE(holds(*a, *cell, generated)) << "stripe " << s;
    bytes += a->part_layout(s, 7 * s).data_bytes;
  }
  EXPECT_EQ(gate_->streams(), before + 2);  // stripe 0 alone, then 1..6 together
  EXPECT_EQ(cache.stats().failed_transfers, 0u);
  EXPECT_EQ(progress.io_read_bytes(), bytes);
  EXPECT_EQ(trace.size(), 7u);  // one span per part
}

// Stripe 2 is written to the factor once; a batch of 1..4 then reads 1 from A, 2 from the
// factor and 3, 4 from A: three streams.
TEST_P(IoRoleTest, CopyOnFirstWriteSplitsABatchByObject) {
  open_gated();
  FactorIo rig(*store_);
  const auto written = [](int64_t r, int64_t c) { return 1000.0 + r + 0.5 * c; };
  {
    const cache::CellView cell = rig.cache.request(request_of(*rig.a, 2, 0)).value();
    ASSERT_TRUE(rig.cache.wait_for(2, cache::CellState::kWaitElimJ).is_ok());
    rig.cache.transition(2, cache::CellState::kElimJ);
    const storage::PartLayout layout = rig.a->part_layout(2, 0);
    const int64_t h = rig.a->geometry().rows(2);
    for (int64_t c = 0; c < kN; ++c) {
      for (int64_t r = 0; r < h; ++r) {
        const double v = written(rig.a->geometry().row_begin(2) + r, c);
        std::memcpy(cell.buffer + layout.data_offset + 8 * (c * h + r), &v, 8);
      }
    }
    rig.cache.transition(2, cache::CellState::kIdle);
    ASSERT_TRUE(rig.cache.flush().is_ok());  // dirty: uploaded to the factor
  }
  const int before = gate_->streams();
  queue_behind_one(rig.cache, *rig.a, 0, {1, 2, 3, 4}, /*col_step=*/0);
  for (int64_t s = 0; s < 5; ++s) {
    auto cell = rig.cache.wait_for(s, cache::CellState::kWaitElimJ);
    ASSERT_TRUE(cell.is_ok()) << cell.status().to_string();
    if (s == 2) {
      EXPECT_TRUE(holds(*rig.a, *cell, written));
    } else {
      EXPECT_TRUE(holds(*rig.a, *cell, generated)) << "stripe " << s;
    }
  }
  EXPECT_EQ(gate_->streams(), before + 4);
}

// Two I/O threads (engine.io_threads = 2): every stripe written back by them reads back from the
// factor, and every part read arrives once with its values.
TEST_P(IoRoleTest, TwoThreadsWriteBackAndReadEveryPartOnce) {
  open_gated();
  auto a = store_->open_matrix("A").value();
  auto f = store_->create_factor("F", *a).value();
  const auto written = [](int64_t r, int64_t c) { return -1.0 - r - 0.25 * c; };
  {
    cache::StripeCache cache(64 << 20);
    ProgressMeter progress(nullptr, 1.0);
    IoRole io(cache, progress, nullptr, 2);
    io.set_sources(a.get(), f.get());
    for (int64_t s = 0; s < 7; ++s) {
      const cache::CellView cell = cache.request(request_of(*a, s, 0)).value();
      ASSERT_TRUE(cache.wait_for(s, cache::CellState::kWaitElimJ).is_ok());
      ASSERT_TRUE(holds(*a, cell, generated)) << "stripe " << s;
      cache.transition(s, cache::CellState::kElimJ);
      const storage::PartLayout layout = a->part_layout(s, 0);
      const int64_t h = a->geometry().rows(s);
      for (int64_t c = 0; c < kN; ++c) {
        for (int64_t r = 0; r < h; ++r) {
          const double v = written(a->geometry().row_begin(s) + r, c);
          std::memcpy(cell.buffer + layout.data_offset + 8 * (c * h + r), &v, 8);
        }
      }
      cache.transition(s, cache::CellState::kIdle);
    }
    ASSERT_TRUE(cache.flush().is_ok());  // seven uploads over the two threads
    EXPECT_EQ(progress.io_written_bytes(), progress.io_read_bytes());
  }
  cache::StripeCache cache(64 << 20);
  ProgressMeter progress(nullptr, 1.0);
  IoRole io(cache, progress, nullptr, 2);
  io.set_sources(f.get(), nullptr);
  for (int64_t s = 0; s < 7; ++s) ASSERT_TRUE(cache.request(request_of(*f, s, 0)).is_ok());
  for (int64_t s = 0; s < 7; ++s) {
    auto cell = cache.wait_for(s, cache::CellState::kWaitElimJ);
    ASSERT_TRUE(cell.is_ok()) << cell.status().to_string();
    EXPECT_TRUE(holds(*f, *cell, written)) << "stripe " << s;
  }
  EXPECT_EQ(cache.stats().failed_transfers, 0u);
}

// The write hook: the checksum runs off the role's thread and reaches `written` with the CRC of
// the bytes written; an error of `written` fails the upload with its message.
TEST_P(IoRoleTest, WriteHookChecksumsBesideTheWriteAndItsErrorFailsTheUpload) {
  open_gated();
  FactorIo rig(*store_);
  std::mutex mu;
  std::vector<std::pair<int64_t, uint32_t>> seen;   // guarded by mu
  std::thread::id checksum_thread, written_thread;  // guarded by mu
  bool fail = false;                                // guarded by mu
  rig.io.set_write_hook(
      {[&](const cache::CellView& cell) {
         const storage::PartLayout layout = rig.f->part_layout(cell.stripe, cell.i0_store);
         std::lock_guard<std::mutex> lock(mu);
         checksum_thread = std::this_thread::get_id();
         return storage::crc32c_extend(0, cell.buffer + layout.data_offset, layout.data_bytes);
       },
       [&](const cache::CellView& cell, uint32_t crc) {
         std::lock_guard<std::mutex> lock(mu);
         written_thread = std::this_thread::get_id();
         if (fail) return Status::io_error("journal full");
         seen.emplace_back(cell.stripe, crc);
         return Status::ok();
       }});
  auto dirty = [&](int64_t s) {
    ASSERT_TRUE(rig.cache.request(request_of(*rig.a, s, 0)).is_ok());
    ASSERT_TRUE(rig.cache.wait_for(s, cache::CellState::kWaitElimJ).is_ok());
    rig.cache.transition(s, cache::CellState::kElimJ);
    rig.cache.transition(s, cache::CellState::kIdle);
  };
  dirty(1);
  ASSERT_TRUE(rig.cache.flush().is_ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(seen.size(), 1u);
    const storage::PartLayout layout = rig.f->part_layout(1, 0);
    auto buffer = storage::AlignedBuffer::allocate(layout.buffer_bytes).value();
    ASSERT_TRUE(rig.f->read_part(1, 0, buffer.data()).is_ok());
    EXPECT_EQ(seen[0].first, 1);
    EXPECT_EQ(seen[0].second,
              storage::crc32c_extend(0, buffer.data() + layout.data_offset, layout.data_bytes));
    EXPECT_NE(checksum_thread, written_thread);
    fail = true;
  }
  dirty(2);
  const Status st = rig.cache.flush();
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("journal full"), std::string::npos) << st.to_string();
}

// The fault engine fails the first request of stripe 3 inside the batch 1..6: the cache fails
// with that error, every part is reported exactly once (done ones hold the right values), and
// the role stops.
TEST_P(IoRoleTest, ReadErrorReachesEveryPartNotYetReportedOnce) {
  // Where stripe 3's first request falls: count requests of the same parts read one by one.
  int64_t fault_at = 0;
  {
    const storage::FaultPlan never{storage::FaultPlan::Kind::kFail, int64_t{1} << 40, EIO};
    open_gated(&never);
    auto a = store_->open_matrix("A").value();
    for (int64_t s = 0; s < 3; ++s) {
      auto buffer = storage::AlignedBuffer::allocate(a->part_layout(s, 0).buffer_bytes).value();
      ASSERT_TRUE(a->read_part(s, 0, buffer.data()).is_ok());
    }
    fault_at = fault_->requests_seen();
    a.reset();
    store_.reset();
  }
  const storage::FaultPlan plan{storage::FaultPlan::Kind::kFail, fault_at, EIO};
  open_gated(&plan);
  auto a = store_->open_matrix("A").value();
  cache::StripeCache cache(64 << 20);
  ProgressMeter progress(nullptr, 1.0);
  TraceRecorder trace;
  auto io = std::make_unique<IoRole>(cache, progress, &trace);
  io->set_sources(a.get(), nullptr);
  queue_behind_one(cache, *a, 0, {1, 2, 3, 4, 5, 6}, /*col_step=*/0);
  const Status failure = cache.wait_for(6, cache::CellState::kWaitElimJ).status();
  ASSERT_FALSE(failure.is_ok());
  io.reset();  // joins the role: every report of the failed batch has been made
  EXPECT_TRUE(fault_->fired());
  EXPECT_EQ(failure.code(), StatusCode::kIoError);
  EXPECT_NE(failure.message().find("stripe 3"), std::string::npos) << failure.message();
  uint64_t failed = 0;
  for (int64_t s = 0; s < 7; ++s) {
    failed += cache.state_of(s) == cache::CellState::kDownloading;
  }
  EXPECT_EQ(cache.state_of(3), cache::CellState::kDownloading);
  EXPECT_EQ(cache.state_of(0), cache::CellState::kWaitElimJ);
  EXPECT_GE(failed, 1u);
  EXPECT_EQ(cache.stats().failed_transfers, failed);  // once per part not reported done
  EXPECT_EQ(trace.size(), 7u);
}

std::string engine_case(const ::testing::TestParamInfo<std::string>& c) {
  return c.param == "pread" ? "pread" : "uring";
}

INSTANTIATE_TEST_SUITE_P(Engines, IoRoleTest, ::testing::Values("pread", "io_uring"), engine_case);

}  // namespace
}  // namespace stripesolve::scheduler
