#include "client/npy_writer.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "protocol/npy.h"

namespace stripesolve::client {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(NpyWriterTest, RowsInAnyOrderGiveAValidNpy) {
  const std::string path = ::testing::TempDir() + "/x_" + std::to_string(::getpid()) + ".npy";
  {
    NpyWriter w;
    ASSERT_TRUE(w.open(path, 5, 2).is_ok());
    const double last[] = {4, 40, 3, 30};  // rows 3..4 row-major... row 3 = (4,40)? see below
    const double first[] = {0, 0, 1, 10, 2, 20};
    ASSERT_TRUE(w.write_rows(3, 2, reinterpret_cast<const char*>(last)).is_ok());
    EXPECT_FALSE(std::filesystem::exists(path));  // nothing visible before finish
    EXPECT_EQ(w.finish().message(), "only 2 of 5 rows of " + path + " were received");
    ASSERT_TRUE(w.write_rows(0, 3, reinterpret_cast<const char*>(first)).is_ok());
    ASSERT_TRUE(w.finish().is_ok());
  }
  const std::string bytes = read_all(path);
  int64_t r, c;
  auto x = protocol::npy_to_column_major(bytes, &r, &c);
  ASSERT_TRUE(x.is_ok()) << x.status().message();
  EXPECT_EQ(r, 5);
  EXPECT_EQ(c, 2);
  EXPECT_EQ(*x, (std::vector<double>{0, 1, 2, 4, 3, 0, 10, 20, 40, 30}));
  std::filesystem::remove(path);
}

TEST(NpyWriterTest, ArrayShapeFromTheDaemonNamesTheFileShape) {
  const std::string path = ::testing::TempDir() + "/shaped_" + std::to_string(::getpid()) + ".npy";
  {
    NpyWriter w;
    EXPECT_EQ(w.open(path, 6, 1, {4, 2}).message(),
              "result array shape (4, 2) does not hold 6 x 1 values");
    // Two systems of one unknown keep their (2, 1) shape, which (n, nrhs) = (2, 1) would write as
    // (2,).
    ASSERT_TRUE(w.open(path, 2, 1, {2, 1}).is_ok());
    const double x[] = {7, 8};
    ASSERT_TRUE(w.write_rows(0, 2, reinterpret_cast<const char*>(x)).is_ok());
    ASSERT_TRUE(w.finish().is_ok());
  }
  const std::string bytes = read_all(path);
  auto h = protocol::inspect_npy(bytes);
  ASSERT_TRUE(h.is_ok()) << h.status().message();
  EXPECT_EQ(h->shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(*protocol::npy_float_values(bytes, *h), (std::vector<double>{7, 8}));
  std::filesystem::remove(path);
}

TEST(NpyWriterTest, AbandonedWriterLeavesNothing) {
  // A folder of its own: the other tests of this file run at the same time (ctest -j) and keep
  // their own temporary files in TempDir() while they write.
  const std::filesystem::path dir =
      ::testing::TempDir() + "/abandoned_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directory(dir);
  const std::string path = (dir / "y.npy").string();
  {
    NpyWriter w;
    ASSERT_TRUE(w.open(path, 3, 1).is_ok());
    EXPECT_EQ(w.write_rows(2, 2, "0123456789abcdef").message(),
              "rows [2, 4) outside [0, 3) of " + path);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ADD_FAILURE() << "left behind: " << e.path();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stripesolve::client

namespace stripesolve::client {
namespace {

TEST(NpyWriterTest, OverlappingRowsAreRejected) {
  const std::string path = ::testing::TempDir() + "/z_" + std::to_string(::getpid()) + ".npy";
  NpyWriter w;
  ASSERT_TRUE(w.open(path, 10, 1).is_ok());
  std::vector<double> v(10, 1.0);
  const char* p = reinterpret_cast<const char*>(v.data());
  ASSERT_TRUE(w.write_rows(6, 4, p).is_ok());
  ASSERT_TRUE(w.write_rows(2, 4, p).is_ok());
  EXPECT_EQ(w.write_rows(5, 2, p).message(), "rows [5, 7) of " + path + " were written twice");
  EXPECT_EQ(w.write_rows(0, 3, p).message(), "rows [0, 3) of " + path + " were written twice");
  ASSERT_TRUE(w.write_rows(0, 2, p).is_ok());
  EXPECT_TRUE(w.finish().is_ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace stripesolve::client
