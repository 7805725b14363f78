#include "daemon/matrix_jobs.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/npy.h"

namespace stripesolve::daemon {
namespace {

using namespace std::chrono_literals;

// The restart check of import and create (JobType::finished_before_restart): a job that was
// RUNNING at a kill and whose matrix the store holds complete, from the job's source, made since
// the job started, is the job's own finished work.
class MatrixJobsRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ss-matrix-jobs-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    storage::StoreConfig c;
    c.paths = {dir_ + "/ssd0"};
    c.io_engine = "pread";
    c.stripe_rows = 16;
    c.free_space_reserve = 0;
    auto store = storage::MatrixStore::open(c);
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    store_ = std::move(*store);
    register_matrix_jobs(registry_, *store_, engine_);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::optional<nlohmann::json> check(const std::string& type, const nlohmann::json& params,
                                      Clock::time_point started) {
    const JobType* jt = registry_.find(type);
    EXPECT_NE(jt, nullptr);
    EXPECT_TRUE(jt != nullptr && jt->finished_before_restart);
    return jt->finished_before_restart(params, started);
  }

  std::string dir_;
  scheduler::EngineConfig engine_;
  JobRegistry registry_;
  std::unique_ptr<storage::MatrixStore> store_;
};

TEST_F(MatrixJobsRestartTest, AnImportWhoseMatrixIsStoredCompleteIsFinished) {
  const auto started = Clock::now() - 2s;
  constexpr int64_t kN = 40;
  const std::string path = dir_ + "/a.npy";
  {
    std::ofstream f(path, std::ios::binary);
    f << storage::make_npy_header({kN, kN});
    for (int64_t k = 0; k < kN * kN; ++k) {
      const double v = k % (kN + 1) == 0 ? 100.0 : static_cast<double>(k % 7);
      f.write(reinterpret_cast<const char*>(&v), sizeof v);
    }
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto imported = store_->import_npy("A", fd, "/home/u/a.npy");
  ::close(fd);
  ASSERT_TRUE(imported.is_ok()) << imported.status().to_string();
  const nlohmann::json params = {
      {"type", "matrix_import"}, {"name", "A"}, {"file", {{"fd", 0}}}, {"label", "/home/u/a.npy"}};

  const auto done = check("matrix_import", params, started);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ((*done)["name"], "A");
  EXPECT_EQ((*done)["n"], kN);
  EXPECT_EQ((*done)["state"], "complete");
  EXPECT_EQ((*done)["id"], imported->id);
  // Another file's import, an import that started after the matrix was made (someone else's),
  // another name: not this job's work.
  nlohmann::json other = params;
  other["label"] = "/home/u/b.npy";
  EXPECT_FALSE(check("matrix_import", other, started).has_value());
  EXPECT_FALSE(check("matrix_import", params, Clock::now() + 5s).has_value());
  other = params;
  other["name"] = "B";
  EXPECT_FALSE(check("matrix_import", other, started).has_value());
  // A matrix export or delete has no such check: a restart fails them as before.
  EXPECT_FALSE(registry_.find("matrix_export")->finished_before_restart);
}

TEST_F(MatrixJobsRestartTest, ACreateWhoseMatrixIsStoredCompleteIsFinished) {
  const auto started = Clock::now() - 2s;
  ASSERT_TRUE(store_->create_generated("G", 48, {"uniform", 7}).is_ok());
  const nlohmann::json params = {{"type", "matrix_create"}, {"name", "G"}, {"n", 48}, {"seed", 7}};
  const auto done = check("matrix_create", params, started);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ((*done)["name"], "G");
  EXPECT_EQ((*done)["source"], "generator uniform seed 7");
  nlohmann::json other = params;
  other["seed"] = 8;  // another recipe
  EXPECT_FALSE(check("matrix_create", other, started).has_value());
  other = params;
  other["generator"] = "diag_dominant";
  EXPECT_FALSE(check("matrix_create", other, started).has_value());
}

}  // namespace
}  // namespace stripesolve::daemon
