#include "daemon/tridiag_input.h"

#include <cmath>

#include <gtest/gtest.h>

#include "tridiag/gallery.h"

namespace stripesolve::daemon {
namespace {

using protocol::NpyDtype;
using protocol::NpyHeader;
using tridiag::BatchLayout;

NpyHeader header(std::vector<int64_t> shape, NpyDtype dtype = NpyDtype::kFloat64) {
  NpyHeader h;
  h.shape = std::move(shape);
  h.dtype = dtype;
  return h;
}

std::vector<NamedHeader> four(const std::vector<int64_t>& shape,
                              NpyDtype dtype = NpyDtype::kFloat64) {
  return {{"dl", header(shape, dtype)},
          {"d", header(shape, dtype)},
          {"du", header(shape, dtype)},
          {"rhs", header(shape, dtype)}};
}

constexpr uint64_t kNoCap = UINT64_MAX;

TEST(TridiagInputTest, ParamsDefaultsAndErrors) {
  auto p = parse_tridiag_params(nlohmann::json::object());
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->algorithm, tridiag::Algorithm::kAuto);
  EXPECT_EQ(p->layout, BatchLayout::kStrided);
  EXPECT_FALSE(p->unstable_ok);
  EXPECT_EQ(p->device, TridiagDevice::kAuto);
  auto q = parse_tridiag_params({{"algorithm", "pcr_thomas"},
                                 {"layout", "interleaved"},
                                 {"unstable_ok", true},
                                 {"device", "cpu"}});
  ASSERT_TRUE(q.is_ok());
  EXPECT_EQ(q->algorithm, tridiag::Algorithm::kPcrThomas);
  EXPECT_EQ(q->layout, BatchLayout::kInterleaved);
  EXPECT_TRUE(q->unstable_ok);
  EXPECT_EQ(q->device, TridiagDevice::kCpu);
  EXPECT_EQ(
      parse_tridiag_params({{"algorithm", "lu"}}).status().message(),
      "unknown tridiagonal algorithm 'lu' (expected auto, thomas, cr, pcr, cr_pcr, pcr_thomas, "
      "cr_pcr_thomas, bondeli, spike or gepp)");
  EXPECT_EQ(parse_tridiag_params({{"layout", "ragged"}}).status().message(),
            "field 'layout' must be 'strided' or 'interleaved', got 'ragged'");
  EXPECT_EQ(parse_tridiag_params({{"device", "tpu"}}).status().message(),
            "field 'device' must be 'auto', 'cpu' or 'gpu', got 'tpu'");
  EXPECT_EQ(parse_tridiag_params({{"unstable_ok", "yes"}}).status().message(),
            "field 'unstable_ok' must be a boolean, got string");
  EXPECT_EQ(parse_tridiag_params({{"algorithm", 3}}).status().message(),
            "field 'algorithm' must be a string, got number");
}

TEST(TridiagInputTest, InlineSizes) {
  EXPECT_EQ(*parse_inline_sizes({3, 5, 2}), (std::vector<int64_t>{3, 5, 2}));
  EXPECT_EQ(parse_inline_sizes({3, "x"}).status().message(),
            "sizes[1] must be an integer, got \"x\"");
  EXPECT_EQ(parse_inline_sizes("3,5").status().message(),
            "field 'sizes' must be a list of integers or {\"upload\": id}, got string");
}

TEST(TridiagInputTest, StridedInterleavedAndSingleShapes) {
  auto strided = check_tridiag_batch(four({50, 257}), BatchLayout::kStrided, std::nullopt, kNoCap);
  ASSERT_TRUE(strided.is_ok()) << strided.status().to_string();
  EXPECT_EQ(strided->layout, BatchLayout::kStrided);
  EXPECT_EQ(strided->count, 50u);
  EXPECT_EQ(strided->n, 257u);
  EXPECT_EQ(strided->unknowns, 50u * 257u);
  EXPECT_EQ(strided->describe(), "50 systems of 257 (strided)");
  EXPECT_EQ(strided->locate(257 * 3 + 4), std::make_pair(std::size_t{3}, std::size_t{4}));

  auto interleaved =
      check_tridiag_batch(four({257, 50}), BatchLayout::kInterleaved, std::nullopt, kNoCap);
  ASSERT_TRUE(interleaved.is_ok());
  EXPECT_EQ(interleaved->count, 50u);
  EXPECT_EQ(interleaved->n, 257u);
  EXPECT_EQ(interleaved->shape().layout, BatchLayout::kInterleaved);
  EXPECT_EQ(interleaved->locate(50 * 4 + 3), std::make_pair(std::size_t{3}, std::size_t{4}));

  auto single = check_tridiag_batch(four({1000}, NpyDtype::kFloat32), BatchLayout::kStrided,
                                    std::nullopt, kNoCap);
  ASSERT_TRUE(single.is_ok());
  EXPECT_EQ(single->count, 1u);
  EXPECT_EQ(single->n, 1000u);
  EXPECT_EQ(single->dtype, NpyDtype::kFloat32);
  EXPECT_EQ(single->array_shape, (std::vector<int64_t>{1000}));
  EXPECT_EQ(single->describe(), "one system of 1000");
}

TEST(TridiagInputTest, RaggedSizes) {
  auto ragged =
      check_tridiag_batch(four({10}), BatchLayout::kStrided, std::vector<int64_t>{3, 5, 2}, kNoCap);
  ASSERT_TRUE(ragged.is_ok()) << ragged.status().to_string();
  EXPECT_EQ(ragged->layout, BatchLayout::kRagged);
  EXPECT_EQ(ragged->count, 3u);
  EXPECT_EQ(ragged->shape().unknowns(), 10u);
  EXPECT_EQ(ragged->describe(), "3 systems of 2..5 (ragged)");
  EXPECT_EQ(ragged->locate(8), std::make_pair(std::size_t{2}, std::size_t{0}));
  EXPECT_EQ(
      check_tridiag_batch(four({12}), BatchLayout::kStrided, std::vector<int64_t>{3, 5, 2}, kNoCap)
          .status()
          .message(),
      "the sizes add up to 10 unknowns but rhs has 12 elements");
  EXPECT_EQ(check_tridiag_batch(four({12}), BatchLayout::kStrided,
                                std::vector<int64_t>{3, INT64_MAX, 2}, kNoCap)
                .status()
                .message(),
            "the sizes add up to 9223372036854775812 unknowns but rhs has 12 elements");
  EXPECT_EQ(check_tridiag_batch(four({12}), BatchLayout::kStrided,
                                std::vector<int64_t>{INT64_MAX, INT64_MAX, INT64_MAX}, kNoCap)
                .status()
                .message(),
            "the sizes add up to more than 2^64 unknowns but rhs has 12 elements");
  EXPECT_EQ(
      check_tridiag_batch(four({10}), BatchLayout::kStrided, std::vector<int64_t>{3, 0, 7}, kNoCap)
          .status()
          .message(),
      "sizes[1] is 0; every system needs at least one unknown");
  EXPECT_EQ(check_tridiag_batch(four({10}), BatchLayout::kStrided, std::vector<int64_t>{}, kNoCap)
                .status()
                .message(),
            "sizes is empty (a ragged batch needs at least one system)");
  EXPECT_EQ(
      check_tridiag_batch(four({5, 2}), BatchLayout::kStrided, std::vector<int64_t>{10}, kNoCap)
          .status()
          .message(),
      "with sizes the arrays must be 1-D (the systems one after another), rhs has shape (5, 2)");
  EXPECT_EQ(
      check_tridiag_batch(four({10}), BatchLayout::kInterleaved, std::vector<int64_t>{10}, kNoCap)
          .status()
          .message(),
      "layout 'interleaved' cannot be combined with sizes (a ragged batch stores its systems one "
      "after "
      "another)");
}

TEST(TridiagInputTest, MismatchedShapesDtypesAndEmptyArrays) {
  auto arrays = four({50, 257});
  arrays[1].header.shape = {50, 256};
  EXPECT_EQ(
      check_tridiag_batch(arrays, BatchLayout::kStrided, std::nullopt, kNoCap).status().message(),
      "d has shape (50, 256) but rhs has shape (50, 257); dl, d, du and rhs must all have the same "
      "shape");
  arrays = four({257});
  arrays[0].header.dtype = NpyDtype::kFloat32;
  EXPECT_EQ(
      check_tridiag_batch(arrays, BatchLayout::kStrided, std::nullopt, kNoCap).status().message(),
      "dl is float32 but rhs is float64; dl, d, du and rhs must all have the same dtype");
  arrays[2].header.dtype = NpyDtype::kInt64;
  EXPECT_EQ(
      check_tridiag_batch(arrays, BatchLayout::kStrided, std::nullopt, kNoCap).status().message(),
      "du has dtype int64; the arrays must be float64 or float32");
  EXPECT_EQ(check_tridiag_batch(four({0}), BatchLayout::kStrided, std::nullopt, kNoCap)
                .status()
                .message(),
            "rhs has shape (0,): a system needs at least one unknown (n >= 1)");
  EXPECT_EQ(check_tridiag_batch(four({4, 0}), BatchLayout::kStrided, std::nullopt, kNoCap)
                .status()
                .message(),
            "rhs has shape (4, 0): a system needs at least one unknown (n >= 1)");
  EXPECT_EQ(check_tridiag_batch(four({0, 4}), BatchLayout::kStrided, std::nullopt, kNoCap)
                .status()
                .message(),
            "rhs has shape (0, 4): the batch has no systems");
}

TEST(TridiagInputTest, MemoryCap) {
  // 1000 x 100 unknowns, four float64 arrays: 3.2 MB.
  EXPECT_TRUE(
      check_tridiag_batch(four({1000, 100}), BatchLayout::kStrided, std::nullopt, 3200000).is_ok());
  auto over = check_tridiag_batch(four({1000, 100}), BatchLayout::kStrided, std::nullopt, 3199999);
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(over.status().message(),
            "the batch has 100000 unknowns, 3.05 MiB as four float64 arrays, over "
            "tridiag.max_bytes (3.05 MiB); "
            "split it into smaller batches or raise tridiag.max_bytes");
}

TEST(TridiagInputTest, NonFiniteValuesNameArrayAndIndex) {
  auto single = *check_tridiag_batch(four({20}), BatchLayout::kStrided, std::nullopt, kNoCap);
  std::vector<double> v(20, 1.0);
  EXPECT_TRUE(check_finite("d", v, single).is_ok());
  v[17] = std::nan("");
  EXPECT_EQ(check_finite("d", v, single).message(), "d[17] is not finite (nan)");
  auto batch = *check_tridiag_batch(four({4, 5}), BatchLayout::kStrided, std::nullopt, kNoCap);
  v = std::vector<double>(20, 1.0);
  v[13] = -INFINITY;
  EXPECT_EQ(check_finite("rhs", v, batch).message(),
            "rhs[13] is not finite (-inf): system 2, row 3");
  auto ragged =
      *check_tridiag_batch(four({20}), BatchLayout::kStrided, std::vector<int64_t>{15, 5}, kNoCap);
  v[13] = 1.0;
  v[16] = INFINITY;
  EXPECT_EQ(check_finite("du", v, ragged).message(), "du[16] is not finite (inf): system 1, row 1");
}

TEST(TridiagInputTest, MaxRelativeResidualFindsTheWorstSystem) {
  // Two interleaved 3x3 systems: A = tridiag(1, 4, 1), x = (1, 1, 1) gives f = (5, 6, 5).
  auto plan = *check_tridiag_batch(four({3, 2}), BatchLayout::kInterleaved, std::nullopt, kNoCap);
  const std::vector<double> dl = {0, 0, 1, 1, 1, 1}, d(6, 4.0), du = {1, 1, 1, 1, 0, 0};
  const std::vector<double> f = {5, 5, 6, 6, 5, 5};
  std::vector<double> x(6, 1.0);
  auto exact = max_relative_residual(plan, dl.data(), d.data(), du.data(), f.data(), x.data());
  EXPECT_EQ(exact.max_relative, 0.0);
  x[3] = 1.5;  // system 1, row 1: residual row 1 = 2, rows 0 and 2 = 0.5
  auto off = max_relative_residual(plan, dl.data(), d.data(), du.data(), f.data(), x.data());
  EXPECT_EQ(off.worst_system, 1u);
  EXPECT_NEAR(off.max_relative, std::sqrt(4.5 / 86.0), 1e-15);
  x[0] = std::nan("");
  EXPECT_EQ(
      max_relative_residual(plan, dl.data(), d.data(), du.data(), f.data(), x.data()).max_relative,
      INFINITY);
}

// An interleaved batch is checked in blocks of consecutive systems: the summary equals the same
// systems' as a strided batch, for counts that are not a multiple of the block, on one thread
// and on three (chunks of the batch), with a spoiled system and a non-finite one.
TEST(TridiagInputTest, InterleavedResidualsEqualTheStridedOnes) {
  const std::size_t n = 37;
  for (std::size_t count : {1, 7, 8, 21, 300}) {
    SCOPED_TRACE("count " + std::to_string(count));
    std::vector<double> s[5];  // dl, d, du, f, x of each system, one after another
    for (auto& v : s) v.resize(n * count);
    for (std::size_t k = 0; k < n * count; ++k) {
      s[0][k] = std::sin(0.3 * static_cast<double>(k));
      s[1][k] = 4.0 + std::cos(0.7 * static_cast<double>(k));
      s[2][k] = std::sin(1.1 * static_cast<double>(k) + 1.0);
      s[3][k] = std::cos(0.2 * static_cast<double>(k));
      s[4][k] = 0.25 * s[3][k];  // roughly the solution: residuals not zero, not huge
    }
    if (count > 5) s[4][5 * n + 3] += 1e-3;             // system 5 the worst
    if (count > 7) s[4][7 * n + n - 1] = std::nan("");  // system 7 not finite
    std::vector<double> il[5];
    for (int a = 0; a < 5; ++a) {
      il[a].resize(n * count);
      for (std::size_t j = 0; j < count; ++j) {
        for (std::size_t i = 0; i < n; ++i) il[a][i * count + j] = s[a][j * n + i];
      }
    }
    const int64_t c = static_cast<int64_t>(count), rows = static_cast<int64_t>(n);
    const TridiagPlan strided =
        *check_tridiag_batch(four({c, rows}), BatchLayout::kStrided, std::nullopt, kNoCap);
    const TridiagPlan interleaved =
        *check_tridiag_batch(four({rows, c}), BatchLayout::kInterleaved, std::nullopt, kNoCap);
    const ResidualSummary want = max_relative_residual(strided, s[0].data(), s[1].data(),
                                                       s[2].data(), s[3].data(), s[4].data(), 1);
    EXPECT_GT(want.max_relative, 0.0);
    if (count > 7) {
      EXPECT_EQ(want.worst_system, 7u);
    }
    for (unsigned threads : {1u, 3u}) {
      const ResidualSummary got =
          max_relative_residual(interleaved, il[0].data(), il[1].data(), il[2].data(), il[3].data(),
                                il[4].data(), threads);
      EXPECT_EQ(got.max_relative, want.max_relative);
      EXPECT_EQ(got.worst_system, want.worst_system);
      EXPECT_EQ(got.max_backward_error, want.max_backward_error);
      EXPECT_EQ(got.worst_backward_system, want.worst_backward_system);
      EXPECT_EQ(got.above_tolerance, want.above_tolerance);
    }
  }
}

// The CPU solver's report has the daemon's own check's figures to the bit (the daemon takes them
// instead of checking again): strided and interleaved batches through the lanes, ragged ones
// a system at a time, systems that fall back to gepp, warned ones above their tolerance, and
// systems scaled so far that their residual takes the scaled pass.
TEST(TridiagInputTest, TheCpuReportHasTheDaemonsCheckFigures) {
  struct Case {
    const char* what;
    BatchLayout layout;
    tridiag::Algorithm algorithm;
    bool fallback;
  };
  const Case cases[] = {
      {"strided gepp", BatchLayout::kStrided, tridiag::Algorithm::kGepp, false},
      {"interleaved gepp", BatchLayout::kInterleaved, tridiag::Algorithm::kGepp, false},
      {"ragged gepp", BatchLayout::kRagged, tridiag::Algorithm::kGepp, false},
      {"strided thomas, fallback", BatchLayout::kStrided, tridiag::Algorithm::kThomas, true},
      {"interleaved thomas, warned", BatchLayout::kInterleaved, tridiag::Algorithm::kThomas, false},
      {"ragged pcr, fallback", BatchLayout::kRagged, tridiag::Algorithm::kPcr, true}};
  const std::size_t n = 64, count = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::size_t> sizes(count, n);
    if (c.layout == BatchLayout::kRagged) {
      for (std::size_t j = 0; j < count; ++j) sizes[j] = 1 + (j * 37) % 90;
    }
    // Strided order first: random U(-1, 1) systems, every fifth Toeplitz (1, 1e-8, 1) (thomas
    // grows without bound: falls back or is warned about), systems 6 and 7 scaled by 2^±700.
    std::vector<double> a[4];
    for (std::size_t j = 0; j < count; ++j) {
      const std::size_t m = sizes[j];
      const tridiag::TridiagonalMatrix t = j % 5 == 3 ? tridiag::toeplitz_matrix(m, 1, 1e-8, 1)
                                                      : tridiag::stability_matrix(1, m, 20 + j);
      const std::vector<double> f = tridiag::random_vector(m, 70 + j);
      const int scale = j == 6 ? 700 : j == 7 ? -700 : 0;
      const std::vector<double>* parts[4] = {&t.dl, &t.d, &t.du, &f};
      for (int k = 0; k < 4; ++k)
        for (double v : *parts[k]) a[k].push_back(std::ldexp(v, scale));
    }
    std::size_t unknowns = 0;
    for (std::size_t m : sizes) unknowns += m;
    if (c.layout == BatchLayout::kInterleaved) {
      for (auto& v : a) {
        std::vector<double> il(unknowns);
        for (std::size_t j = 0; j < count; ++j)
          for (std::size_t i = 0; i < n; ++i) il[i * count + j] = v[j * n + i];
        v = std::move(il);
      }
    }
    const int64_t cs = static_cast<int64_t>(count), ns = static_cast<int64_t>(n);
    const std::vector<int64_t> shape =
        c.layout == BatchLayout::kRagged ? std::vector<int64_t>{static_cast<int64_t>(unknowns)}
        : c.layout == BatchLayout::kInterleaved ? std::vector<int64_t>{ns, cs}
                                                : std::vector<int64_t>{cs, ns};
    std::optional<std::vector<int64_t>> ragged;
    if (c.layout == BatchLayout::kRagged) ragged.emplace(sizes.begin(), sizes.end());
    const auto plan = check_tridiag_batch(four(shape), c.layout, ragged, kNoCap);
    ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
    std::vector<double> x(unknowns);
    tridiag::SolveOptions options;
    options.algorithm = c.algorithm;
    options.fallback = c.fallback;
    options.threads = 2;
    const auto report = tridiag::solve_batch(
        plan->shape(), {a[0].data(), a[1].data(), a[2].data(), a[3].data(), x.data()}, options);
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    ASSERT_TRUE(report->relative_residual.has_value());
    if (c.fallback) {
      EXPECT_FALSE(report->fell_back.empty());
    }
    const ResidualSummary want = max_relative_residual(*plan, a[0].data(), a[1].data(), a[2].data(),
                                                       a[3].data(), x.data(), 2);
    EXPECT_GT(want.max_relative, 0.0);
    EXPECT_EQ(report->relative_residual->value, want.max_relative);
    EXPECT_EQ(report->relative_residual->system, want.worst_system);
    EXPECT_EQ(report->max_backward_error, want.max_backward_error);
    EXPECT_EQ(report->worst_system, want.worst_backward_system);
    EXPECT_EQ(report->tolerance, want.tolerance);
    EXPECT_EQ(report->above_tolerance, want.above_tolerance);
    if (c.algorithm == tridiag::Algorithm::kThomas && !c.fallback) {
      EXPECT_GT(want.above_tolerance, 0u);
    }
  }
}

}  // namespace
}  // namespace stripesolve::daemon
