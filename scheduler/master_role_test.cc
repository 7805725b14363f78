// MasterRole's hand-out order (roles.h): hits go as soon as what they depend on has been handed
// out, and the gates keep the working set of the in-order walk. The arithmetic is the CPU
// backend's, behind an Elimination that holds one chosen update back and records when each
// task starts and ends.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "scheduler/factor_run.h"
#include "scheduler/io_role.h"
#include "storage/matrix_store.h"

namespace stripesolve::scheduler {
namespace {

// Delegates to the CPU elimination; the update of `held` waits until released.
class HoldingElimination final : public Elimination {
 public:
  HoldingElimination(Elimination& inner, std::string held, bool overlap)
      : inner_(inner), held_(std::move(held)), overlap_(overlap) {}

  Status eliminate(int64_t i, const cache::CellView& cell, stripe::StripePivots* pivots) override {
    record_start(to_string(Task::eliminate(i)));
    return inner_.eliminate(i, cell, pivots);
  }
  Status update(int worker, const Task& t, const cache::CellView& j,
                const std::vector<cache::CellView>& is,
                const std::vector<stripe::StripePivots>& pivots, bool* keep_on_device) override {
    const std::string name = to_string(t);
    record_start(name);
    if (name != held_) return inner_.update(worker, t, j, is, pivots, keep_on_device);
    {
      std::unique_lock<std::mutex> lock(mu_);
      released_cv_.wait_for(lock, std::chrono::seconds(20), [this] { return released_; });
    }
    Status st = inner_.update(worker, t, j, is, pivots, keep_on_device);
    record_start(name + " end");
    return st;
  }
  bool sweeps_may_overlap() const override { return overlap_; }

  // Releases the held update once every one of `tasks` has started (or after `timeout`).
  void release_after(const std::vector<std::string>& tasks, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    started_cv_.wait_for(lock, timeout, [&] {
      return std::all_of(tasks.begin(), tasks.end(),
                         [&](const std::string& t) { return order_.count(t) > 0; });
    });
    released_ = true;
    released_cv_.notify_all();
  }
  // Start position of each task (0 first), and of the held update's end.
  std::map<std::string, int> order() const {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }

 private:
  void record_start(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    order_[name] = next_++;
    started_cv_.notify_all();
  }

  Elimination& inner_;
  const std::string held_;
  const bool overlap_;
  mutable std::mutex mu_;
  std::condition_variable started_cv_;
  std::condition_variable released_cv_;
  bool released_ = false;             // guarded by mu_
  std::map<std::string, int> order_;  // guarded by mu_
  int next_ = 0;                      // guarded by mu_
};

class MasterRoleTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    root_ = ::testing::TempDir() + "/master_role_test." + std::to_string(::getpid()) + "." +
            std::to_string(counter++);
    std::filesystem::remove_all(root_);
    storage::StoreConfig c;
    c.paths = {root_ + "/ssd0"};
    c.stripe_rows = 16;
    c.min_segment_bytes = 4096;
    c.free_space_reserve = 0;
    c.io_engine = "pread";
    store_ = storage::MatrixStore::open(c).value();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(root_);
  }

  std::string root_;
  std::unique_ptr<storage::MatrixStore> store_;
};

// 16 stripes in meta-stripes of 4. Sweep 0 runs upward (J = 4 .. 15), sweep 1 downward (J = 15
// .. 8), so the update of J = 15 by [0, 4) is the last of sweep 0 and blocks the first of sweep
// 1. Held back, it keeps sweep 1's critical updates (J = 8 .. 11 by [4, 8), which the in-order
// walk reached last) waiting only when sweeps may not overlap; the elimination of stripe 8 waits
// for the end of sweep 0 either way (elim.I runs at most one meta-stripe ahead).
TEST_P(MasterRoleTest, CriticalUpdatesOfTheNextSweepGoBesideTheEndOfThePreviousOne) {
  const bool overlap = GetParam();
  const int64_t n = 16 * 16;
  ASSERT_TRUE(store_->create_generated("A", n, {"diag_dominant", 3}, 16).is_ok());
  auto a = store_->open_matrix("A").value();
  auto factor = store_->create_factor("A.lu.row", *a).value();
  auto backend = backend::make_cpu_backend();
  cache::StripeCache cache(64ull << 20);
  ProgressMeter progress(nullptr, 1.0);
  CancelToken cancel;
  IoRole io(cache, progress, nullptr);
  io.set_sources(a.get(), factor.get());
  EngineContext ctx{*backend, cache, progress, cancel, nullptr, 1.0};
  FactorParams params{.pivot = stripe::PivotMode::kRow,
                      .strategy = Strategy::kMetaZigzag,
                      .meta_stripes = 4,
                      .substripe_rows = 8,
                      .elim_j_workers = 2,
                      .write_back = false};
  auto cpu = CpuElimination::create(ctx, *factor, params).value();
  HoldingElimination holding(*cpu, "U15<[0,4)", overlap);
  const std::vector<std::string> criticals = {"U8<[4,8)", "U9<[4,8)", "U10<[4,8)", "U11<[4,8)"};
  // Overlapping, the held update ends once all four have started (whatever their order); else
  // after a while in which they could have started.
  std::thread releaser([&] {
    if (overlap) {
      holding.release_after(criticals, std::chrono::seconds(10));
    } else {
      holding.release_after({"none"}, std::chrono::milliseconds(300));
    }
  });
  auto pivots = run_factorization(ctx, *factor, params, &holding);
  releaser.join();
  ASSERT_TRUE(pivots.is_ok()) << pivots.status().to_string();
  const auto order = holding.order();
  const std::string held_end = "U15<[0,4) end";
  ASSERT_EQ(order.count(held_end), 1u);
  for (const std::string& critical : criticals) {
    ASSERT_EQ(order.count(critical), 1u) << critical;
    if (overlap) {
      EXPECT_LT(order.at(critical), order.at(held_end)) << critical;
    } else {
      EXPECT_GT(order.at(critical), order.at(held_end)) << critical;
    }
  }
  EXPECT_GT(order.at("E8"), order.at(held_end));
}

INSTANTIATE_TEST_SUITE_P(Sweeps, MasterRoleTest, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "Overlap" : "OneAtATime"; });

}  // namespace
}  // namespace stripesolve::scheduler
