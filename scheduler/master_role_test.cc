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
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "scheduler/factor_run.h"
#include "scheduler/io_role.h"
#include "scheduler/trace.h"
#include "storage/matrix_store.h"

namespace stripesolve::scheduler {
namespace {

// Delegates to the CPU elimination; each update named in `held` waits until released.
class HoldingElimination final : public Elimination {
 public:
  HoldingElimination(Elimination& inner, std::vector<std::string> held, bool overlap,
                     int64_t meta_ahead = 1)
      : inner_(inner), held_(std::move(held)), overlap_(overlap), meta_ahead_(meta_ahead) {}

  Status eliminate(int64_t i, const cache::CellView& cell, stripe::StripePivots* pivots) override {
    record_start(to_string(Task::eliminate(i)));
    return inner_.eliminate(i, cell, pivots);
  }
  Status update(int worker, const Task& t, const cache::CellView& j,
                const std::vector<cache::CellView>& is,
                const std::vector<stripe::StripePivots>& pivots, cache::UpdatedJ* where) override {
    const std::string name = to_string(t);
    record_start(name);
    if (std::find(held_.begin(), held_.end(), name) == held_.end()) {
      return inner_.update(worker, t, j, is, pivots, where);
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      released_cv_.wait_for(lock, std::chrono::seconds(20),
                            [&] { return released_.count(name) > 0; });
    }
    Status st = inner_.update(worker, t, j, is, pivots, where);
    record_start(name + " end");
    return st;
  }
  bool sweeps_may_overlap() const override { return overlap_; }
  int64_t meta_stripes_ahead() const override { return meta_ahead_; }

  // Releases the held update `which` (the first held one if empty) once every one of `tasks`
  // has started (or after `timeout`).
  void release_after(const std::vector<std::string>& tasks, std::chrono::milliseconds timeout,
                     const std::string& which = "") {
    std::unique_lock<std::mutex> lock(mu_);
    started_cv_.wait_for(lock, timeout, [&] {
      return std::all_of(tasks.begin(), tasks.end(),
                         [&](const std::string& t) { return order_.count(t) > 0; });
    });
    released_.insert(which.empty() ? held_.front() : which);
    released_cv_.notify_all();
  }
  // Start position of each task (0 first), and of each held update's end.
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
  const std::vector<std::string> held_;
  const bool overlap_;
  const int64_t meta_ahead_;
  mutable std::mutex mu_;
  std::condition_variable started_cv_;
  std::condition_variable released_cv_;
  std::set<std::string> released_;    // guarded by mu_
  std::map<std::string, int> order_;  // guarded by mu_
  int next_ = 0;                      // guarded by mu_
};

constexpr const char* kEndOfSweep0 = "U15<[0,4) end";
// 16 stripes of 16 rows in meta-stripes of 4.
const FactorParams four_meta_stripes{.pivot = stripe::PivotMode::kRow,
                                     .strategy = Strategy::kMetaZigzag,
                                     .meta_stripes = 4,
                                     .substripe_rows = 8,
                                     .elim_j_workers = 2,
                                     .write_back = false};

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

  // A (16 stripes of 16 rows, from `generator`), its factor object, a cache of `cache_bytes`
  // (a function of A, 0: 64 MiB) with a traced I/O role, and the CPU elimination with `params`:
  // what the tests share.
  struct Rig {
    std::unique_ptr<storage::StripedMatrix> a;
    std::unique_ptr<storage::StripedMatrix> factor;
    std::unique_ptr<backend::Backend> backend = backend::make_cpu_backend();
    std::unique_ptr<cache::StripeCache> cache;
    ProgressMeter progress{nullptr, 1.0};
    CancelToken cancel;
    TraceRecorder trace;
    std::unique_ptr<IoRole> io;
    std::unique_ptr<EngineContext> ctx;
    std::unique_ptr<Elimination> cpu;
  };
  std::unique_ptr<Rig> rig(const std::string& generator, uint64_t parts_in_cache,
                           const FactorParams& params) {
    auto r = std::make_unique<Rig>();
    EXPECT_TRUE(store_->create_generated("A", 16 * 16, {generator, 3}, 16).is_ok());
    r->a = store_->open_matrix("A").value();
    r->factor = store_->create_factor("A.lu.row", *r->a).value();
    const uint64_t part = cache::Arena::round_up(r->a->part_layout(1, 0).buffer_bytes);
    r->cache =
        std::make_unique<cache::StripeCache>(parts_in_cache > 0 ? parts_in_cache * part : 64 << 20);
    r->io = std::make_unique<IoRole>(*r->cache, r->progress, &r->trace);
    r->io->set_sources(r->a.get(), r->factor.get());
    r->ctx = std::make_unique<EngineContext>(
        EngineContext{*r->backend, *r->cache, r->progress, r->cancel, nullptr, 1.0});
    r->cpu = CpuElimination::create(*r->ctx, *r->factor, params,
                                    meta_stripe_of(params.strategy, r->factor->geometry().stripes,
                                                   params.meta_stripes))
                 .value();
    return r;
  }

  // 16 stripes in meta-stripes of 4 (kMetaZigzag, row pivoting), factored with the update of
  // J = 15 by [0, 4), the last of sweep 0, held until `release` (run on a thread beside the
  // factorization) lets it go: the order in which the tasks started, with "U15<[0,4) end".
  static std::map<std::string, int> factor_holding_the_end_of_sweep_0(
      Rig& r, bool overlap, int64_t meta_ahead,
      const std::function<void(HoldingElimination&)>& release) {
    HoldingElimination holding(*r.cpu, {"U15<[0,4)"}, overlap, meta_ahead);
    std::thread releaser([&] { release(holding); });
    auto pivots = run_factorization(*r.ctx, *r.factor, four_meta_stripes, &holding);
    releaser.join();
    EXPECT_TRUE(pivots.is_ok()) << pivots.status().to_string();
    auto order = holding.order();
    EXPECT_EQ(order.count(kEndOfSweep0), 1u);
    return order;
  }

  std::string root_;
  std::unique_ptr<storage::MatrixStore> store_;
};

// Sweep 0 runs upward (J = 4 .. 15), sweep 1 downward (J = 15 .. 8), so the update of J = 15 by
// [0, 4) is the last of sweep 0 and blocks the first of sweep 1. Held back, it keeps sweep 1's
// critical updates (J = 8 .. 11 by [4, 8), which the in-order walk reached last) waiting only
// when sweeps may not overlap; the elimination of stripe 8 waits for the end of sweep 0 either
// way (elim.I runs at most one meta-stripe ahead).
TEST_P(MasterRoleTest, CriticalUpdatesOfTheNextSweepGoBesideTheEndOfThePreviousOne) {
  const bool overlap = GetParam();
  auto r = rig("diag_dominant", 0, four_meta_stripes);
  const std::vector<std::string> criticals = {"U8<[4,8)", "U9<[4,8)", "U10<[4,8)", "U11<[4,8)"};
  // Overlapping, the held update ends once all four have started (whatever their order); else
  // after a while in which they could have started.
  const auto order =
      factor_holding_the_end_of_sweep_0(*r, overlap, 1, [&](HoldingElimination& holding) {
        if (overlap) {
          holding.release_after(criticals, std::chrono::seconds(10));
        } else {
          holding.release_after({"none"}, std::chrono::milliseconds(300));
        }
      });
  for (const std::string& critical : criticals) {
    ASSERT_EQ(order.count(critical), 1u) << critical;
    if (overlap) {
      EXPECT_LT(order.at(critical), order.at(kEndOfSweep0)) << critical;
    } else {
      EXPECT_GT(order.at(critical), order.at(kEndOfSweep0)) << critical;
    }
  }
  EXPECT_GT(order.at("E8"), order.at(kEndOfSweep0));
}

// Where the elimination lets elim.I run two meta-stripes ahead (the GPU tier keeping the whole
// matrix on one device: Elimination::meta_stripes_ahead), meta-stripe 2 is eliminated once its
// stripes have had their updates, while the last update of sweep 0 is still held: a
// factorization reading A as it goes does not wait for the whole of A before its third
// meta-stripe. (The GPU tests' host engine solves with this gate against LAPACK.)
TEST_F(MasterRoleTest, EliminationsRunFurtherAheadWhereTheEliminationAllowsIt) {
  auto r = rig("diag_dominant", 0, four_meta_stripes);
  const std::vector<std::string> third = {"E8", "E9", "E10", "E11"};
  const auto order = factor_holding_the_end_of_sweep_0(
      *r, true, 2,
      [&](HoldingElimination& holding) { holding.release_after(third, std::chrono::seconds(10)); });
  for (const std::string& e : third) {
    ASSERT_EQ(order.count(e), 1u) << e;
    EXPECT_LT(order.at(e), order.at(kEndOfSweep0)) << e;
  }
  // Meta-stripe 3 waits for the end of sweep 0: two ahead, no more.
  EXPECT_GT(order.at("E12"), order.at(kEndOfSweep0));
}

// Out of core, the next elimination goes as soon as its stripe's last update ends, while the
// front's miss waits for memory, instead of its stripe being evicted for that miss and read
// again after the sweep. A cache of three parts in the zigzag order (16 stripes): stripe 0
// stuck, and the updates of J = 1 and J = 5 by it held, so that the sweep's miss of J = 6 waits
// for memory. J = 1 is released first: its stripe is then the only part that could be evicted,
// and the master hands out E1 instead; J = 5 follows once E1 has started (or after a while).
TEST_F(MasterRoleTest, AnEliminationGoesBeforeTheSweepThatWouldEvictItsStripe) {
  const FactorParams params{.pivot = stripe::PivotMode::kRow,
                            .strategy = Strategy::kMetaZigzag,
                            .meta_stripes = 1,
                            .substripe_rows = 8,
                            .elim_j_workers = 2,
                            .write_back = false};
  auto r = rig("uniform", 3, params);
  HoldingElimination holding(*r->cpu, {"U1<[0,1)", "U5<[0,1)"}, /*overlap=*/true);
  std::thread releaser([&] {
    holding.release_after({"U5<[0,1)"}, std::chrono::seconds(10), "U1<[0,1)");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the master's turn
    holding.release_after({"E1"}, std::chrono::seconds(2), "U5<[0,1)");
  });
  auto pivots = run_factorization(*r->ctx, *r->factor, params, &holding);
  releaser.join();
  ASSERT_TRUE(pivots.is_ok()) << pivots.status().to_string();
  const auto order = holding.order();
  ASSERT_EQ(order.count("U5<[0,1) end"), 1u);
  ASSERT_EQ(order.count("E1"), 1u);
  // E1 on the part its update left, not on one read again after the sweep by stripe 0.
  int reads_of_1 = 0;
  const nlohmann::json events = nlohmann::json::parse(r->trace.to_json())["traceEvents"];
  for (const auto& e : events) {
    if (e.value("name", "") == "read" && e["args"].value("stripe", "") == "1") ++reads_of_1;
  }
  EXPECT_EQ(reads_of_1, 1);
  EXPECT_LT(order.at("E1"), order.at("U5<[0,1) end"));
  const auto stats = r->cache->stats();
  EXPECT_LE(stats.peak_bytes, stats.budget);
}

INSTANTIATE_TEST_SUITE_P(Sweeps, MasterRoleTest, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "Overlap" : "OneAtATime"; });

}  // namespace
}  // namespace stripesolve::scheduler
