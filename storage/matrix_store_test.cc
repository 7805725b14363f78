#include "storage/matrix_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "storage/data_file.h"
#include "storage/engine_select.h"
#include "storage/store_test_support.h"

namespace stripesolve::storage {
namespace {

class MatrixStoreTest : public StoreCaseTest {
 protected:
  void SetUp() override { open_store("store"); }

  // Every stripe from several columns equals the generator.
  void expect_generated(StripedMatrix& m, const GeneratorSpec& spec) {
    const StripeGeometry& g = m.geometry();
    for (int64_t I = 0; I < g.stripes; ++I) {
      for (int64_t c0 : {int64_t{0}, int64_t{1}, g.n / 2, g.n - 1, g.n}) {
        if (c0 > g.n) continue;
        auto v = read_part_values(m, I, c0);
        ASSERT_TRUE(v.is_ok()) << v.status().to_string();
        const int64_t h = g.rows(I);
        ASSERT_EQ(static_cast<int64_t>(v->size()), h * (g.n - c0));
        for (int64_t c = c0; c < g.n; ++c) {
          for (int64_t r = 0; r < h; ++r) {
            ASSERT_EQ((*v)[(c - c0) * h + r], generated_value(spec, g.n, g.row_begin(I) + r, c))
                << "stripe " << I << " row " << r << " col " << c;
          }
        }
      }
    }
  }
};

TEST_P(MatrixStoreTest, GeneratedMatricesRoundTrip) {
  const GeneratorSpec spec{"uniform", 42};
  // Odd orders, n < S (S = 64), exactly S, and several stripes with unequal heights.
  for (int64_t n : {1, 7, 63, 64, 131, 301}) {
    const std::string name = std::string("A").append(std::to_string(n));
    auto info = store_->create_generated(name, n, spec);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    EXPECT_EQ(info->geometry.n, n);
    EXPECT_EQ(info->kind, "matrix");
    EXPECT_EQ(info->path_count, GetParam().paths);
    auto m = store_->open_matrix(name);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    expect_generated(**m, spec);
  }
  auto list = store_->list();
  ASSERT_TRUE(list.is_ok());
  EXPECT_EQ(list->size(), 6u);
}

TEST_P(MatrixStoreTest, FactorLifecycle) {
  ASSERT_TRUE(store_->create_generated("A", 201, {"uniform", 1}, 50).is_ok());
  auto a = std::move(store_->open_matrix("A")).value();
  auto f = store_->create_factor("F", *a);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ((*f)->geometry(), a->geometry());
  EXPECT_EQ(store_->info("F").status().code(), StatusCode::kNotFound);  // invisible until commit
  EXPECT_EQ(store_->list()->size(), 1u);

  // Copy-on-first-write pattern of the engine: read from A, write to F, partly from column c0.
  const StripeGeometry& g = a->geometry();
  std::vector<std::vector<double>> expect(g.stripes);
  for (int64_t I = 0; I < g.stripes; ++I) {
    auto v = read_part_values(*a, I, 0);
    ASSERT_TRUE(v.is_ok());
    for (double& x : *v) x = -2 * x;
    ASSERT_TRUE(write_part_values(**f, I, 0, *v).is_ok());
    // Then update the tail from column 37 on.
    std::vector<double> tail(v->begin() + 37 * g.rows(I), v->end());
    for (double& x : tail) x += 1;
    ASSERT_TRUE(write_part_values(**f, I, 37, tail).is_ok());
    std::copy(tail.begin(), tail.end(), v->begin() + 37 * g.rows(I));
    expect[I] = *v;
  }
  const std::vector<std::byte> pivots = {std::byte{1}, std::byte{2}, std::byte{3}};
  ASSERT_TRUE((*f)->write_blob("pivots", pivots).is_ok());
  ASSERT_TRUE((*f)->commit().is_ok());
  EXPECT_EQ((*f)->commit().code(), StatusCode::kFailedPrecondition);
  f->reset();

  auto info = store_->info("F");
  ASSERT_TRUE(info.is_ok());
  EXPECT_EQ(info->kind, "factor");
  EXPECT_EQ(info->source, "factor of A");
  auto ff = store_->open_factor("F");
  ASSERT_TRUE(ff.is_ok()) << ff.status().to_string();
  for (int64_t I = 0; I < g.stripes; ++I) {
    auto v = read_part_values(**ff, I, 0);
    ASSERT_TRUE(v.is_ok()) << v.status().to_string();
    EXPECT_EQ(*v, expect[I]);
  }
  auto blob = (*ff)->read_blob("pivots");
  ASSERT_TRUE(blob.is_ok());
  EXPECT_EQ(*blob, pivots);
  EXPECT_EQ((*ff)->read_blob("refine").status().message(), "factor 'F' has no blob 'refine'");
  EXPECT_EQ((*ff)->write_part(0, 0, nullptr).message(), "factor 'F' is open read-only");
  EXPECT_EQ(store_->open_factor("A").status().message(), "object 'A' is a matrix, not a factor");
}

TEST_P(MatrixStoreTest, FactorsRecordTheIdentityOfTheirMatrix) {
  ASSERT_TRUE(store_->create_generated("A", 100, {"uniform", 1}, 30).is_ok());
  auto a = std::move(store_->open_matrix("A")).value();
  EXPECT_EQ(a->info().id.size(), 32u);
  EXPECT_EQ(a->info().checksum_summary, checksum_summary(a->checksums()));
  auto f = std::move(store_->create_factor("A.lu.row", *a)).value();
  ASSERT_TRUE(f->commit().is_ok());
  f.reset();
  auto factor = *store_->info("A.lu.row");
  EXPECT_NE(factor.id, a->info().id);
  ASSERT_TRUE(factor.factor_of.has_value());
  EXPECT_EQ(*factor.factor_of, (FactorOf{a->info().id, 100, a->info().checksum_summary}));
  EXPECT_TRUE(is_factor_of(factor, a->info()));
  EXPECT_EQ(*store_->factors_of("A"), std::vector<std::string>{"A.lu.row"});
  const MatrixInfo old = a->info();
  a.reset();

  // The same name, source and creation second, another object: the factor does not match it.
  ASSERT_TRUE(store_->remove("A").is_ok());
  auto again = store_->create_generated("A", 100, {"uniform", 1}, 30);
  ASSERT_TRUE(again.is_ok());
  EXPECT_NE(again->id, old.id);
  EXPECT_EQ(again->checksum_summary, old.checksum_summary);  // the same data
  EXPECT_FALSE(is_factor_of(factor, *again));
  EXPECT_TRUE(store_->factors_of("A")->empty());
  MatrixInfo other_data = old;
  other_data.checksum_summary ^= 1;
  EXPECT_FALSE(is_factor_of(factor, other_data));
  MatrixInfo no_id = old;
  no_id.id.clear();
  EXPECT_FALSE(is_factor_of(factor, no_id));
}

TEST_P(MatrixStoreTest, RemovingAMatrixRemovesItsFactors) {
  ASSERT_TRUE(store_->create_generated("A", 50, {"uniform", 1}).is_ok());
  ASSERT_TRUE(store_->create_generated("B", 50, {"uniform", 1}).is_ok());
  for (const char* name : {"A.lu.row", "A.lu.none"}) {
    auto a = std::move(store_->open_matrix("A")).value();
    ASSERT_TRUE(std::move(store_->create_factor(name, *a)).value()->commit().is_ok());
  }
  {
    auto b = std::move(store_->open_matrix("B")).value();
    ASSERT_TRUE(std::move(store_->create_factor("B.lu.row", *b)).value()->commit().is_ok());
  }
  {  // An open matrix (a solve running) keeps everything.
    auto a = std::move(store_->open_matrix("A")).value();
    EXPECT_EQ(store_->remove_with_factors("A").status().message(),
              "object 'A' is open and cannot be removed");
  }
  auto removed = store_->remove_with_factors("A");
  ASSERT_TRUE(removed.is_ok()) << removed.status().to_string();
  EXPECT_EQ(*removed, (std::vector<std::string>{"A.lu.none", "A.lu.row"}));
  auto left = store_->list();
  ASSERT_EQ(left->size(), 2u);
  EXPECT_EQ((*left)[0].name, "B");
  EXPECT_EQ((*left)[1].name, "B.lu.row");
  // A factor alone goes alone.
  EXPECT_TRUE(store_->remove_with_factors("B.lu.row")->empty());
  EXPECT_EQ(store_->list()->size(), 1u);
}

TEST_P(MatrixStoreTest, NameLocksSerializeTheirHolders) {
  auto first = store_->lock_name("A.lu.row", {});
  ASSERT_TRUE(first.is_ok());
  ASSERT_TRUE(store_->lock_name("B.lu.row", {}).is_ok());  // other names are free
  std::atomic<bool> second_holds{false};
  std::thread waiter([&] {
    auto second = store_->lock_name("A.lu.row", {});
    EXPECT_TRUE(second.is_ok());
    second_holds = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(second_holds.load());
  first->release();
  waiter.join();
  EXPECT_TRUE(second_holds.load());
  // A waiter that is cancelled stops waiting.
  auto held = std::move(store_->lock_name("A.lu.row", {})).value();
  std::atomic<bool> cancel{false};
  std::thread cancelled([&] {
    EXPECT_EQ(store_->lock_name("A.lu.row", [&] { return cancel.load(); }).status().code(),
              StatusCode::kCancelled);
  });
  cancel = true;
  cancelled.join();
}

TEST_P(MatrixStoreTest, UncommittedFactorLeavesNothing) {
  ASSERT_TRUE(store_->create_generated("A", 100, {"uniform", 1}).is_ok());
  auto a = std::move(store_->open_matrix("A")).value();
  {
    auto f = store_->create_factor("F", *a);
    ASSERT_TRUE(f.is_ok());
    ASSERT_TRUE(write_part_values(**f, 0, 0, std::vector<double>(64 * 100, 1.0)).is_ok());
  }
  for (const auto& p : config_.paths) EXPECT_FALSE(std::filesystem::exists(p + "/objects/F"));
  EXPECT_TRUE(store_->create_factor("F", *a).is_ok());
}

TEST_P(MatrixStoreTest, InPlaceFactorization) {
  ASSERT_TRUE(store_->create_generated("A", 90, {"diag_dominant", 3}).is_ok());
  auto ip = store_->open_for_in_place("A");
  ASSERT_TRUE(ip.is_ok()) << ip.status().to_string();
  EXPECT_EQ(store_->info("A")->state, ObjectState::kBeingFactored);
  EXPECT_EQ(store_->open_matrix("A").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->remove("A").message(), "object 'A' is open and cannot be removed");
  auto v = read_part_values(**ip, 1, 10);
  ASSERT_TRUE(v.is_ok());
  for (double& x : *v) x = 0.5;
  ASSERT_TRUE(write_part_values(**ip, 1, 10, *v).is_ok());
  ASSERT_TRUE((*ip)->commit().is_ok());
  ip->reset();
  auto info = store_->info("A");
  EXPECT_EQ(info->kind, "factor");
  EXPECT_EQ(info->state, ObjectState::kComplete);
  auto f = std::move(store_->open_factor("A")).value();
  EXPECT_EQ(*read_part_values(*f, 1, 10), *v);
}

TEST_P(MatrixStoreTest, NamesAndErrors) {
  ASSERT_TRUE(store_->create_generated("A", 10, {"uniform", 1}).is_ok());
  EXPECT_EQ(store_->create_generated("A", 10, {"uniform", 1}).status().message(),
            "an object named 'A' already exists");
  EXPECT_EQ(store_->create_generated("../x", 10, {"uniform", 1}).status().message(),
            "object name '../x' must not start with '.' or '-'");
  EXPECT_EQ(store_->create_generated("a/b", 10, {"uniform", 1}).status().message(),
            "object name 'a/b' may only contain letters, digits, '_', '.' and '-'");
  EXPECT_EQ(store_->create_generated("B", 10, {"nope", 1}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->create_generated("B", 0, {"uniform", 1}).status().message(),
            "matrix order n=0 out of range [1, 1073741824]");
  // Matrix names leave room for their factors' names: 119 characters, factors up to 128.
  const std::string longest(kMaxMatrixNameLength, 'm');
  ASSERT_TRUE(store_->create_generated(longest, 10, {"uniform", 1}).is_ok());
  EXPECT_EQ(store_->create_generated(longest + "x", 10, {"uniform", 1}).status().message(),
            "matrix name '" + longest +
                "x' has 120 characters; matrix names have at most 119, so "
                "that the names of their factors (NAME.lu.<pivot>) fit in 128");
  {
    auto m = std::move(store_->open_matrix(longest)).value();
    EXPECT_TRUE(store_->create_factor(longest + ".lu.local", *m).is_ok());
  }
  ASSERT_TRUE(store_->remove(longest).is_ok());
  EXPECT_EQ(store_->info("B").status().message(), "no object named 'B' in the store");
  auto a = std::move(store_->open_matrix("A")).value();
  EXPECT_EQ(a->read_part(1, 0, nullptr).message(),
            "matrix 'A': stripe 1 from column 0 is outside 1 stripes of 10 columns");
  a.reset();
  EXPECT_TRUE(store_->remove("A").is_ok());
  EXPECT_EQ(store_->remove("A").message(), "no object named 'A' in the store");
  EXPECT_TRUE(store_->list()->empty());
}

TEST_P(MatrixStoreTest, CorruptSegmentIsDetected) {
  ASSERT_TRUE(store_->create_generated("A", 200, {"uniform", 5}).is_ok());
  const std::string data = config_.paths[0] + "/objects/A/data";
  ASSERT_TRUE(flip_bit(data, 100).is_ok());
  auto m = std::move(store_->open_matrix("A")).value();
  auto v = read_part_values(*m, 0, 0);
  ASSERT_EQ(v.status().code(), StatusCode::kCorruption);
  EXPECT_NE(v.status().message().find("matrix 'A': checksum mismatch in segment 0 (stripe 0, " +
                                      data + " at offset 0, "),
            std::string::npos)
      << v.status().message();
}

TEST_P(MatrixStoreTest, CorruptManifestIsDetected) {
  ASSERT_TRUE(store_->create_generated("A", 20, {"uniform", 5}).is_ok());
  ASSERT_TRUE(store_->create_generated("B", 20, {"uniform", 5}).is_ok());
  const std::string manifest = config_.paths[0] + "/objects/A/manifest.json";
  const std::string text = *read_whole_file(manifest, 1 << 20);
  const auto pos = text.find("\"n\": 20");
  ASSERT_NE(pos, std::string::npos);
  std::ofstream(manifest) << text.substr(0, pos) << "\"n\": 21" << text.substr(pos + 7);
  EXPECT_EQ(store_->info("A").status().message(),
            "manifest " + manifest + ": checksum mismatch (the file was altered)");
  EXPECT_EQ(store_->open_matrix("A").status().code(), StatusCode::kCorruption);
  auto list = store_->list();  // the damaged one is listed as such, so that it can be removed
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "A");
  EXPECT_EQ((*list)[0].state, ObjectState::kCorrupt);
  EXPECT_EQ((*list)[0].problem,
            "manifest " + manifest + ": checksum mismatch (the file was altered)");
  EXPECT_EQ((*list)[1].name, "B");
  EXPECT_EQ((*list)[1].state, ObjectState::kComplete);
  ASSERT_TRUE(store_->remove("A").is_ok());
  for (const auto& p : config_.paths) EXPECT_FALSE(std::filesystem::exists(p + "/objects/A"));
  EXPECT_EQ(store_->list()->size(), 1u);
  EXPECT_TRUE(store_->create_generated("A", 20, {"uniform", 5}).is_ok());
}

TEST_P(MatrixStoreTest, TruncatedDataFileIsDetected) {
  ASSERT_TRUE(store_->create_generated("A", 200, {"uniform", 5}).is_ok());
  const std::string data = config_.paths[0] + "/objects/A/data";
  std::filesystem::resize_file(data, 4096);
  EXPECT_EQ(store_->open_matrix("A").status().code(), StatusCode::kCorruption);
}

TEST_P(MatrixStoreTest, ConcurrentReadsOfDifferentStripes) {
  const GeneratorSpec spec{"normal", 9};
  ASSERT_TRUE(store_->create_generated("A", 500, spec, 40).is_ok());
  auto m = std::move(store_->open_matrix("A")).value();
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t I = t; I < m->geometry().stripes; I += 4) {
        auto v = read_part_values(*m, I, 3);
        if (!v.is_ok() || (*v)[0] != generated_value(spec, 500, m->geometry().row_begin(I), 3))
          ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Engines, MatrixStoreTest,
                         ::testing::Values(StoreCase{"pread", 1}, StoreCase{"pread", 3},
                                           StoreCase{"io_uring", 1}, StoreCase{"io_uring", 3}),
                         [](const auto& p) {
                           return p.param.engine + "_" + std::to_string(p.param.paths) + "paths";
                         });

TEST(MatrixStore, ReopenKeepsDataAndChecksPaths) {
  StoreConfig config = temp_store_config("reopen", 2, "pread");
  {
    auto store = std::move(MatrixStore::open(config)).value();
    ASSERT_TRUE(store->create_generated("A", 70, {"hilbert", 0}).is_ok());
    EXPECT_EQ(MatrixStore::open(config).status().code(), StatusCode::kFailedPrecondition);
  }
  auto store = MatrixStore::open(config);
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  auto m = (*store)->open_matrix("A");
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ((*read_part_values(**m, 1, 0))[0], generated_value({"hilbert", 0}, 70, 35, 0));
  m->reset();
  store->reset();
  std::swap(config.paths[0], config.paths[1]);
  EXPECT_EQ(MatrixStore::open(config).status().message(),
            "store path " + config.paths[0] +
                " is path 1 of its store but listed as 0; the "
                "order of paths matters");
}

TEST(MatrixStore, OneDirectoryListedTwiceIsRefused) {
  StoreConfig config = temp_store_config("twice", 2, "pread");
  std::filesystem::create_directories(config.paths[0]);
  std::filesystem::remove_all(config.paths[1]);
  std::filesystem::create_directory_symlink(config.paths[0], config.paths[1]);
  EXPECT_EQ(MatrixStore::open(config).status().message(),
            "store paths 0 and 1 ('" + config.paths[0] + "' and '" + config.paths[1] +
                "') are the same directory; list each directory once in store.paths");
  EXPECT_FALSE(std::filesystem::exists(config.paths[0] + "/stripesolve-store.json"));
}

TEST(MatrixStore, NoSpaceLeavesNothing) {
  StoreConfig config = temp_store_config("nospace", 2, "pread");
  config.free_space_reserve = uint64_t{1} << 62;
  auto store = std::move(MatrixStore::open(config)).value();
  auto info = store->create_generated("A", 100, {"uniform", 1});
  EXPECT_EQ(info.status().code(), StatusCode::kNoSpace);
  EXPECT_TRUE(store->list()->empty());
  EXPECT_FALSE(std::filesystem::exists(config.paths[0] + "/objects/A"));
}

TEST(MatrixStore, CrashLeftoversAreCleanedOnOpen) {
  StoreConfig config = temp_store_config("leftover", 2, "pread");
  {
    auto store = std::move(MatrixStore::open(config)).value();
    ASSERT_TRUE(store->create_generated("A", 30, {"uniform", 1}).is_ok());
    auto a = std::move(store->open_matrix("A")).value();
    auto f = std::move(store->create_factor("F", *a)).value();
    // Simulate a crash: copy F's files away before the uncommitted factor removes them.
    for (int p = 0; p < 2; ++p) {
      std::filesystem::copy(config.paths[p] + "/objects/F", config.paths[p] + "/objects/G",
                            std::filesystem::copy_options::recursive);
    }
  }
  // G holds a manifest naming F: treat as damaged and leave it; make a real leftover instead.
  std::filesystem::remove_all(config.paths[0] + "/objects/G");
  auto store = std::move(MatrixStore::open(config)).value();
  EXPECT_FALSE(std::filesystem::exists(config.paths[1] + "/objects/G"));  // orphaned data
  EXPECT_EQ(store->list()->size(), 1u);
}

TEST(DataFile, FallsBackToBufferedWhenODirectIsRefused) {
  const std::string path = make_temp_dir("direct") + "/f";
  const OpenCall refuse_direct = [](const char* p, int flags, mode_t mode) {
    if (flags & O_DIRECT) {
      errno = EINVAL;
      return -1;
    }
    return ::open(p, flags, mode);
  };
  auto f = open_data_file(path, O_RDWR | O_CREAT, true, refuse_direct);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_FALSE(f->direct());
  auto g = open_data_file(path, O_RDWR, true);
  ASSERT_TRUE(g.is_ok());
  EXPECT_TRUE(g->direct());  // the temp filesystem here takes O_DIRECT
  EXPECT_EQ(open_data_file(path + ".missing", O_RDWR, true).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace stripesolve::storage
