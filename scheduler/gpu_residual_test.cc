// The residual on the device's copy of A (scheduler/gpu_residual.cc), on the CUDA device and on
// the host engine (gpu_dense_fixture.h).
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scheduler/condition.h"
#include "scheduler/gpu_dense_fixture.h"
#include "scheduler/trace.h"
#include "stripe/dense_reference.h"

namespace stripesolve::scheduler {
namespace {

// A solve whose factors stay on the device takes its residual from the device's copy of A
// (filled from the RAM cache during the load, DenseSolveOptions::load_first;
// Plan::device_keeps_original), not from a second read of A from the store: backward errors
// equal to the host's from x (expect_matches_lapack), refinement steps included. Without the
// load (a RAM cache smaller than A) the factorization's first read of each stripe fills the copy,
// and A is read from the store once all the same, and nothing written.
TEST_P(GpuDenseTest, ResidualOnTheDevicesCopyOfA) {
  const int64_t n = 600;
  const auto a = generated("A", n, "uniform", 5);
  const auto b = random_rhs(n, 2);
  DenseSolveOptions o = throwaway_factors();
  o.refinement_steps = 1;
  o.load_first = true;
  EngineConfig c = gpu_engine(false);
  c.meta_stripes = 1;
  c.elim_j_workers = 0;
  auto kept = solve("A", b, 2, o, c);
  ASSERT_TRUE(kept.is_ok()) << kept.status().to_string();
  EXPECT_TRUE(kept->plan.device_keeps_original);
  EXPECT_EQ(kept->residual_source, ResidualSource::kDevice);
  ASSERT_EQ(kept->residual_history.size(), 2u);
  expect_matches_lapack(a, n, b, 2, *kept, 1e-13, "residual on the device's copy of A");
  // The RAM cache keeps no copy beside the device's: its arena (all of it pinned) is A's cells
  // and as much again for holes, not the three times a copy in RAM takes (16 MiB budget).
  const uint64_t a_bytes = 8ull * n * n;
  const uint64_t stripes = (n + 63) / 64;
  EXPECT_FALSE(kept->plan.ram_keeps_original);
  EXPECT_LE(kept->cache_budget, 2 * (a_bytes + stripes * 2 * 4096));  // 4 KiB padding a part
  EXPECT_GE(kept->cache_budget, a_bytes);
  EXPECT_EQ(kept->pinned_bytes, kept->cache_budget);
  EXPECT_LT(kept->io_read_bytes, a_bytes + a_bytes / 2);
  c.ram_budget = 1 * kMiB;  // A is 2.7 MiB: not loaded, the copy from the factorization's reads
  auto read = solve("A", b, 2, o, c);
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_TRUE(read->plan.device_keeps_original);
  EXPECT_EQ(read->residual_source, ResidualSource::kDevice);
  ASSERT_EQ(read->residual_history.size(), 2u);
  expect_matches_lapack(a, n, b, 2, *read, 1e-13, "the copy from the factorization's reads");
  EXPECT_GE(read->io_read_bytes, a_bytes);
  EXPECT_LT(read->io_read_bytes, a_bytes + a_bytes / 2) << "A once, for the factorization";
  // No factors kept: the eliminated stripes stay on the device, never copied to RAM nor written
  // (FactorParams::factors_on_host).
  EXPECT_EQ(read->io_written_bytes, 0u);
  // max |A| is exact either way, and the same pivots give the same U.
  EXPECT_GT(kept->growth, 0.0);
  EXPECT_NEAR(kept->growth, read->growth, 1e-12 * read->growth);
}

// A device keeping the whole matrix beside a RAM cache that holds A: no load (unless asked for,
// DenseSolveOptions::load_first); the factorization reads each stripe as it first needs it, so
// that the reads overlap the arithmetic, A once, and the device's copy for the residual comes
// from those reads. Stored factors or not, the same solution as LAPACK's.
TEST_P(GpuDenseTest, ADeviceKeepingTheMatrixReadsItAsTheFactorizationNeedsIt) {
  const int64_t n = 700;
  const auto a = generated("A", n, "uniform", 6);
  const auto b = random_rhs(n, 2);
  const uint64_t a_bytes = 8ull * n * n;
  EngineConfig c = gpu_engine(false);
  c.meta_stripes = 2;
  const auto traced = [&](const DenseSolveOptions& o, std::string* trace_json) {
    TraceRecorder trace;
    CancelToken cancel;
    auto rep =
        solve_dense(cpu_, engine_.get(), *store_, "A", b.data(), 2, o, c, cancel, {}, &trace);
    *trace_json = trace.to_json();
    return rep;
  };
  const std::string load_span = R"("name":"load")";
  for (const bool store : {false, true}) {
    SCOPED_TRACE(store ? "factors stored" : "factors not kept");
    DenseSolveOptions o = throwaway_factors();
    o.store_factors = store;
    std::string json;
    auto streamed = traced(o, &json);
    ASSERT_TRUE(streamed.is_ok()) << streamed.status().to_string();
    ASSERT_TRUE(streamed->plan.device_resident);
    EXPECT_GE(streamed->cache_budget, a_bytes);  // the RAM cache holds A
    EXPECT_EQ(json.find(load_span), std::string::npos) << "no load";
    EXPECT_EQ(streamed->residual_source, ResidualSource::kDevice);
    EXPECT_GE(streamed->io_read_bytes, a_bytes);
    EXPECT_LT(streamed->io_read_bytes, a_bytes + a_bytes / 2) << "A once";
    expect_matches_lapack(a, n, b, 2, *streamed, 1e-13, "A read as the factorization needs it");
    o.load_first = true;
    auto loaded = traced(o, &json);
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    EXPECT_NE(json.find(load_span), std::string::npos) << "the load, asked for";
    EXPECT_EQ(loaded->residual_source, ResidualSource::kDevice);
    EXPECT_LT(loaded->io_read_bytes, a_bytes + a_bytes / 2) << "A once";
    ASSERT_EQ(loaded->x.size(), streamed->x.size());
    for (size_t k = 0; k < loaded->x.size(); ++k) {
      ASSERT_NEAR(loaded->x[k], streamed->x[k], 1e-9 * std::abs(streamed->x[k]) + 1e-12) << k;
    }
  }
}

// Many right-hand sides for a small matrix under a roomy device budget: the pool, sized to the
// matrix (GpuElimination::create), keeps room for them beside the factors, so the substitution
// and the residual still run on the device (x and r: 9.6 MiB, more than the matrix's own share
// of the pool).
TEST_P(GpuDenseTest, ManyRightHandSidesFindRoomInAPoolSizedToTheMatrix) {
  const int64_t n = 200, nrhs = 3000;
  const auto a = generated("A", n, "uniform", 8);
  const auto b = random_rhs(n, nrhs);
  EngineConfig c = gpu_engine(false);
  c.meta_stripes = 1;
  c.elim_j_workers = 0;
  auto rep = solve("A", b, nrhs, throwaway_factors(), c);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  EXPECT_TRUE(rep->plan.device_keeps_original);
  EXPECT_EQ(rep->residual_source, ResidualSource::kDevice);
  expect_matches_lapack(a, n, b, nrhs, *rep, 1e-13, "3000 right-hand sides");
}

// Right-hand sides too many for x and r beside the factors and the copy: the residual falls
// back to the store's pass (a warning), and the solve completes.
TEST_P(GpuDenseTest, ResidualWithoutRoomOnTheDeviceReadsTheStore) {
  const int64_t n = 600, nrhs = 1000;
  const auto a = generated("A", n, "uniform", 6);
  const auto b = random_rhs(n, nrhs);
  EngineConfig c = gpu_engine(false);
  c.gpu_memory = 16 * kMiB;
  c.meta_stripes = 1;
  c.elim_j_workers = 0;
  auto rep = solve("A", b, nrhs, throwaway_factors(), c);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  EXPECT_TRUE(rep->plan.device_keeps_original);
  EXPECT_EQ(rep->residual_source, ResidualSource::kStore);
  expect_matches_lapack(a, n, b, nrhs, *rep, 1e-13, "the store's residual pass");
}

// Where the device keeps no copy (J parts streaming through a small budget) and the RAM budget
// holds A twice, the load keeps a copy in the RAM cache (Plan::ram_keeps_original) and the
// residual and refinement steps read it on the host's cores: the same backward errors, norms
// and growth as the store's pass, with A read from the store once instead of twice. A budget
// that holds A once has no copy, and reads A again.
TEST_P(GpuDenseTest, ResidualOnACopyOfAInRam) {
  const int64_t n = 600;
  const auto a = generated("A", n, "uniform", 8);
  const auto b = random_rhs(n, 2);
  DenseSolveOptions o = throwaway_factors();
  o.refinement_steps = 1;
  EngineConfig c = gpu_engine(true);  // 16 MiB of RAM, 5 MiB on the device; A is 2.7 MiB
  c.cores = 3;
  auto kept = solve("A", b, 2, o, c);
  ASSERT_TRUE(kept.is_ok()) << kept.status().to_string();
  EXPECT_FALSE(kept->plan.device_keeps_original);
  EXPECT_TRUE(kept->plan.ram_keeps_original);
  EXPECT_EQ(kept->residual_source, ResidualSource::kRam);
  ASSERT_EQ(kept->residual_history.size(), 2u);
  expect_matches_lapack(a, n, b, 2, *kept, 1e-13, "residual on the RAM cache's copy of A");
  c.ram_budget = 4 * kMiB;  // holds A's cells, not a copy beside them
  auto read = solve("A", b, 2, o, c);
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_FALSE(read->plan.ram_keeps_original);
  EXPECT_EQ(read->residual_source, ResidualSource::kStore);
  ASSERT_EQ(read->residual_history.size(), 2u);
  for (size_t step = 0; step < 2; ++step) {
    const double in_ram = kept->residual_history[step], from_store = read->residual_history[step];
    EXPECT_GT(in_ram, 0.0) << step;
    EXPECT_LT(in_ram, 10 * from_store + 1e-17) << step;
    EXPECT_LT(from_store, 10 * in_ram + 1e-17) << step;
  }
  EXPECT_GT(kept->growth, 0.0);
  EXPECT_NEAR(kept->growth, read->growth, 1e-12 * read->growth);
  EXPECT_NEAR(kept->rcond, read->rcond, 1e-6 * read->rcond);  // ||A||_1 the same
  // A read once (the load) against twice (the load and the residual's pass).
  const uint64_t a_bytes = 8ull * n * n;
  EXPECT_GE(kept->io_read_bytes, a_bytes);
  EXPECT_LT(kept->io_read_bytes, a_bytes + a_bytes / 2);
  EXPECT_EQ(kept->io_written_bytes, 0u);  // the factors stay cached for the refinement step
  EXPECT_GE(read->io_read_bytes, 2 * a_bytes) << kept->io_read_bytes;
  // The devices pinned the cells' span only, below the copy; without a copy, all of the cache.
  EXPECT_GT(kept->pinned_bytes, a_bytes);
  EXPECT_LE(kept->pinned_bytes, 16 * kMiB - a_bytes);
  EXPECT_EQ(read->pinned_bytes, 4 * kMiB);
}

// An ill-conditioned matrix's estimate is sharpened after the residual pass on the copy in RAM
// (the GPU tier makes no transposed start in its factorization) with the factors read from the
// cells, not flushed out first: they are not to be kept, and a flush wrote them all and read them
// back (24.5 GiB each way at n = 57344, 17 s of a 59 s solve on the H200 host).
TEST_P(GpuDenseTest, SharpeningBesideTheCopyInRamWritesNoFactors) {
  const int64_t n = 600;
  std::vector<double> a = stripe::uniform_matrix(n, n, 8);
  for (int64_t col = 0; col < n; ++col) {  // columns from 1 to 1e-10: rcond about 1e-14
    const double scale = std::pow(10.0, -10.0 * static_cast<double>(col) / (n - 1));
    for (int64_t row = 0; row < n; ++row) a[static_cast<size_t>(row + col * n)] *= scale;
  }
  store_values("G", n, 64, a);
  const auto b = random_rhs(n, 1);
  EngineConfig c = gpu_engine(true);  // 16 MiB of RAM, 5 MiB on the device; A is 2.7 MiB
  c.cores = 3;
  auto rep = solve("G", b, 1, throwaway_factors(), c);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  EXPECT_EQ(rep->residual_source, ResidualSource::kRam);
  const double exact = 1.0 / (stripe::norm_1(a, n) * stripe::inverse_norm_1(a, n));
  EXPECT_LT(rep->rcond, kSharpenRcondBelow);
  EXPECT_GE(rep->rcond, exact * (1 - 1e-6));
  EXPECT_LT(rep->rcond, 10 * exact);
  EXPECT_EQ(rep->io_written_bytes, 0u);
  const uint64_t a_bytes = 8ull * n * n;
  EXPECT_LT(rep->io_read_bytes, a_bytes + a_bytes / 2) << "A once, the factors from the cells";
}

}  // namespace
}  // namespace stripesolve::scheduler
