// Integration: the quality check of tridiagonal jobs (issue 17) through the daemon and the CLI.
// A ragged batch of Toeplitz (1, 1e-8, 1) and nearly singular systems, solved with every
// algorithm on the CPU: the job is within 10x of LAPACK on every system (after falling back to
// gepp on exactly the systems that need it), or ends COMPLETED_WITH_WARNING naming the cause;
// never a plain COMPLETED above the backward-error tolerance.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "tests/integration/daemon_fixture.h"
#include "tests/integration/npy_files.h"
#include "tests/integration/tridiag_batches.h"
#include "tridiag/gallery.h"
#include "tridiag/lapack_reference.h"

namespace stripesolve::testing {
namespace {

// Systems 0-3 Toeplitz (1, 1e-8, 1) of sizes 3, 8, 64, 9; system 4 diagonally dominant; system 5
// nearly singular (last unpivoted pivot 1e-13).
TridiagBatch hard_batch() {
  TridiagBatch b;
  b.layout = tridiag::BatchLayout::kRagged;
  std::vector<tridiag::TridiagonalMatrix> systems;
  for (std::size_t n : {3u, 8u, 64u, 9u})
    systems.push_back(tridiag::toeplitz_matrix(n, 1.0, 1e-8, 1.0));
  systems.push_back(tridiag::diagonally_dominant_matrix(40, 1));
  systems.push_back(tridiag::near_singular_matrix(30, 2));
  for (std::size_t j = 0; j < systems.size(); ++j) {
    const auto& m = systems[j];
    const std::vector<double> f = tridiag::random_vector(m.d.size(), 10 + j);
    b.sizes.push_back(m.d.size());
    b.dl.insert(b.dl.end(), m.dl.begin(), m.dl.end());
    b.d.insert(b.d.end(), m.d.begin(), m.d.end());
    b.du.insert(b.du.end(), m.du.begin(), m.du.end());
    b.rhs.insert(b.rhs.end(), f.begin(), f.end());
  }
  b.shape = {static_cast<int64_t>(b.d.size())};
  return b;
}

// The largest ratio over the systems of the relative residual to LAPACK dgtsv's.
double worst_ratio_to_lapack(const TridiagBatch& b, const std::vector<double>& x) {
  double worst = 0.0;
  for (std::size_t j = 0, o = 0; j < b.systems(); o += b.sizes[j++]) {
    const std::size_t n = b.sizes[j];
    std::vector<double> ref;
    EXPECT_EQ(tridiag::lapack_dgtsv(&b.dl[o], &b.d[o], &b.du[o], &b.rhs[o], n, ref), 0);
    const double lapack =
        tridiag::relative_residual(&b.dl[o], &b.d[o], &b.du[o], ref.data(), &b.rhs[o], n);
    const double ours =
        tridiag::relative_residual(&b.dl[o], &b.d[o], &b.du[o], &x[o], &b.rhs[o], n);
    worst = std::max(worst, ours / std::max(lapack, 1e-17));
  }
  return worst;
}

TEST(TridiagQuality, EveryAlgorithmWithinTenTimesLapackOrWarned) {
  DaemonFixture d;
  auto c = d.connect();
  const TridiagBatch b = hard_batch();
  client::TridiagRequest req = request_for(write_batch(d.dir(), "", b));
  req.sizes = "3,8,64,9,40,30";
  req.device = "cpu";
  const std::string out = d.dir() + "/x.npy";
  struct Case {
    const char* algorithm;
    bool unstable_ok, fallback;
  };
  std::vector<Case> cases = {{"auto", false, false}, {"auto", true, false}};
  for (const char* a : {"thomas", "cr", "pcr", "cr_pcr", "pcr_thomas", "cr_pcr_thomas", "bondeli",
                        "spike", "gepp"}) {
    cases.push_back({a, false, false});
    cases.push_back({a, false, true});
  }
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.algorithm) + (k.unstable_ok ? " unstable ok" : "") +
                 (k.fallback ? " fallback" : ""));
    req.algorithm = k.algorithm;
    req.unstable_ok = k.unstable_ok;
    req.fallback = k.fallback;
    nlohmann::json job = solve(*c, req, out);
    const std::string state = job.value("state", std::string());
    if (state == "FAILED") {  // only a breakdown of an unpivoted algorithm without fallback
      EXPECT_FALSE(k.fallback) << job.dump();
      EXPECT_EQ(job["error"]["code"], "Numerical") << job.dump();
      continue;
    }
    const auto& r = job["result"];
    const double ratio = worst_ratio_to_lapack(b, read_npy(out).values);
    if (state == "COMPLETED") {
      EXPECT_LE(r["backward_error"].get<double>(), r["tolerance"].get<double>()) << job.dump();
      EXPECT_LE(ratio, 10.0) << job.dump();
      EXPECT_FALSE(job.contains("warning"));
    } else {
      ASSERT_EQ(state, "COMPLETED_WITH_WARNING") << job.dump();
      EXPECT_NE(job["warning"].get<std::string>().find("may be inaccurate"), std::string::npos)
          << job.dump();
    }
    const bool may_fall_back =
        std::string(k.algorithm) == "auto" || std::string(k.algorithm) == "spike" || k.fallback;
    if (may_fall_back) {
      EXPECT_EQ(state, "COMPLETED") << job.dump();
    }
    // Only the affected systems fall back: never the diagonally dominant one (4).
    const auto& listed = r["fell_back_systems"];
    EXPECT_EQ(r["fell_back"].get<std::size_t>(), listed.size());
    for (const auto& j : listed) EXPECT_NE(j.get<int>(), 4) << job.dump();
    if (std::string(k.algorithm) == "gepp" || !may_fall_back) {
      EXPECT_EQ(listed.size(), 0u);
    }
  }
}

// The CLI prints the backward error and the fallbacks, and exits 6 on a warning.
TEST(TridiagQuality, CliShowsTheCheckAndExitsSixOnAWarning) {
  DaemonFixture d;
  const BatchFiles f = write_batch(d.dir(), "", hard_batch());
  const std::string cli = std::string(STRIPESOLVE_CLIENT_BINARY) + " --socket " + d.socket() +
                          " tridiag --device cpu --sizes 3,8,64,9,40,30 --dl " + f.dl + " --d " +
                          f.d + " --du " + f.du + " --rhs " + f.rhs + " ";
  auto run = [&](const std::string& args, std::string* out) {
    const std::string path = d.dir() + "/out.txt";
    const int st = std::system((cli + args + " > " + path + " 2>&1").c_str());
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    *out = ss.str();
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  std::string out;
  EXPECT_EQ(run("--unstable-ok", &out), 0) << out;
  EXPECT_NE(out.find("systems fell back to gepp (first: [0,1,2,3,5])"), std::string::npos) << out;
  EXPECT_NE(out.find("backward error"), std::string::npos) << out;
  EXPECT_EQ(run("--algorithm pcr", &out), 6) << out;
  EXPECT_NE(out.find("COMPLETED_WITH_WARNING"), std::string::npos) << out;
  EXPECT_NE(out.find("pcr does not pivot"), std::string::npos) << out;
  EXPECT_EQ(run("--algorithm pcr --fallback", &out), 0) << out;
}

}  // namespace
}  // namespace stripesolve::testing
