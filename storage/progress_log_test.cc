#include "storage/progress_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "storage/store_test_support.h"

namespace stripesolve::storage {
namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> out(s.size());
  for (size_t k = 0; k < s.size(); ++k) out[k] = static_cast<std::byte>(s[k]);
  return out;
}

TEST(ProgressLogTest, RecordsSurviveAReopenAndATornTailIsCutOff) {
  const std::string path = make_temp_dir("progress") + "/progress";
  {
    std::vector<ProgressLog::Record> records;
    auto log = ProgressLog::open(path, 0600, &records);
    ASSERT_TRUE(log.is_ok()) << log.status().to_string();
    EXPECT_TRUE(records.empty());
    ASSERT_TRUE((*log)->append(bytes_of("first")).is_ok());
    ASSERT_TRUE((*log)->append(bytes_of("second record")).is_ok());
  }
  const auto whole = std::filesystem::file_size(path);
  {
    // A crash in the middle of the third append: half its frame reached the disk.
    const std::vector<std::byte> third = ProgressLog::frame(bytes_of("third"));
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out.write(reinterpret_cast<const char*>(third.data()),
              static_cast<std::streamsize>(third.size() / 2));
  }
  std::vector<ProgressLog::Record> records;
  uint64_t dropped = 0;
  auto log = ProgressLog::open(path, 0600, &records, &dropped);
  ASSERT_TRUE(log.is_ok()) << log.status().to_string();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], bytes_of("first"));
  EXPECT_EQ(records[1], bytes_of("second record"));
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(std::filesystem::file_size(path), whole);  // truncated to the last good record
  ASSERT_TRUE((*log)->append(bytes_of("after")).is_ok());
  log->reset();

  // A flipped bit in the second record: it and everything after it are dropped.
  ASSERT_TRUE(flip_bit(path, 12 + 5 + 9).is_ok());
  records.clear();
  auto again = ProgressLog::open(path, 0600, &records, &dropped);
  ASSERT_TRUE(again.is_ok());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0], bytes_of("first"));
}

TEST(ProgressLogTest, AnIncompleteFactorWithAProgressLogIsKeptForResume) {
  StoreConfig config = temp_store_config("resume", 2, "pread");
  auto store = MatrixStore::open(config);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  ASSERT_TRUE((*store)->create_generated("A", 120, {"uniform", 1}, 40).is_ok());
  auto a = std::move((*store)->open_matrix("A")).value();
  auto f = std::move((*store)->create_factor("A.lu.row", *a)).value();
  auto v = read_part_values(*a, 1, 0);
  ASSERT_TRUE(v.is_ok());
  for (double& x : *v) x += 1;
  ASSERT_TRUE(write_part_values(*f, 1, 0, *v).is_ok());
  ASSERT_TRUE(f->sync_data().is_ok());
  auto log = ProgressLog::open(f->progress_path(), 0600, nullptr);
  ASSERT_TRUE(log.is_ok());
  ASSERT_TRUE((*log)->append(bytes_of("stripe 1")).is_ok());
  // What a crash leaves: the object's files as they are (a destroyed factor is deleted, so
  // keep a copy of its folders and put them back).
  const std::string saved = make_temp_dir("resume-saved");
  for (size_t p = 0; p < config.paths.size(); ++p) {
    std::filesystem::copy(config.paths[p] + "/objects/A.lu.row", saved + "/" + std::to_string(p),
                          std::filesystem::copy_options::recursive);
  }
  log->reset();
  f.reset();
  a.reset();
  store->reset();
  for (size_t p = 0; p < config.paths.size(); ++p) {
    std::filesystem::copy(saved + "/" + std::to_string(p), config.paths[p] + "/objects/A.lu.row",
                          std::filesystem::copy_options::recursive);
  }
  store = MatrixStore::open(config);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  EXPECT_EQ((*store)->info("A.lu.row").status().code(), StatusCode::kNotFound);  // still invisible
  a = std::move((*store)->open_matrix("A")).value();
  EXPECT_EQ((*store)->resumable_factors().value(), std::vector<std::string>{"A.lu.row"});
  EXPECT_EQ((*store)->reopen_factor("B", *a).status().code(), StatusCode::kNotFound);  // none
  EXPECT_EQ((*store)->reopen_factor("A", *a).status().code(), StatusCode::kNotFound);  // complete
  auto reopened = (*store)->reopen_factor("A.lu.row", *a);
  ASSERT_TRUE(reopened.is_ok()) << reopened.status().to_string();
  auto back = read_part_values(**reopened, 1, 0);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, *v);
  std::vector<ProgressLog::Record> records;
  ASSERT_TRUE(ProgressLog::open((*reopened)->progress_path(), 0600, &records).is_ok());
  EXPECT_EQ(records.size(), 1u);
  EXPECT_EQ((*store)->remove_resumable("A.lu.row").code(),
            StatusCode::kFailedPrecondition);  // open
  ASSERT_TRUE((*reopened)->commit().is_ok());
  EXPECT_FALSE(std::filesystem::exists((*reopened)->progress_path()));
  EXPECT_TRUE((*store)->info("A.lu.row").is_ok());
  EXPECT_TRUE((*store)->resumable_factors().value().empty());
}

// The progress log goes before the manifest says complete: a commit cut short between the two
// (here the manifest's write fails) leaves a half-made factor without a log, which nothing
// resumes, never a complete factor with a stale log.
TEST(ProgressLogTest, ACommitCutShortBeforeTheManifestLeavesNoLog) {
  StoreConfig config = temp_store_config("commit-order", 1, "pread");
  auto store = MatrixStore::open(config);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  ASSERT_TRUE((*store)->create_generated("A", 80, {"uniform", 1}, 40).is_ok());
  auto a = std::move((*store)->open_matrix("A")).value();
  auto f = std::move((*store)->create_factor("A.lu.row", *a)).value();
  auto log = ProgressLog::open(f->progress_path(), 0600, nullptr);
  ASSERT_TRUE(log.is_ok());
  ASSERT_TRUE((*log)->append(bytes_of("stripe 0")).is_ok());
  log->reset();
  // A folder where the manifest's temporary file goes: its write fails (EISDIR).
  const std::string tmp = config.paths[0] + "/objects/A.lu.row/manifest.json.tmp";
  ASSERT_TRUE(std::filesystem::create_directory(tmp));
  EXPECT_FALSE(f->commit().is_ok());
  EXPECT_FALSE(std::filesystem::exists(f->progress_path()));
  EXPECT_EQ((*store)->info("A.lu.row").status().code(), StatusCode::kNotFound);  // not complete
  EXPECT_TRUE((*store)->resumable_factors().value().empty());
  std::filesystem::remove(tmp);
}

}  // namespace
}  // namespace stripesolve::storage
