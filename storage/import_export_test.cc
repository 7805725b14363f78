#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>

#include <gtest/gtest.h>

#include "storage/column_batches.h"
#include "storage/data_file.h"
#include "storage/engine_select.h"
#include "storage/fault_engine.h"
#include "storage/matrix_store.h"
#include "storage/npy.h"
#include "storage/store_test_support.h"
#include "storage/stripe_stream.h"

namespace stripesolve::storage {
namespace {

const GeneratorSpec values_spec{"normal", 17};

// Writes an .npy (or raw with header = "") file of generated values in the requested form.
void write_matrix_file(const std::string& path, const std::string& header, int64_t n, bool fortran,
                       bool f32, bool big_endian, int64_t drop_bytes = 0) {
  std::string data;
  for (int64_t a = 0; a < n; ++a) {
    for (int64_t b = 0; b < n; ++b) {
      const double v =
          fortran ? generated_value(values_spec, n, b, a) : generated_value(values_spec, n, a, b);
      char bytes[8];
      if (f32) {
        uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(v));
        if (big_endian) bits = __builtin_bswap32(bits);
        std::memcpy(bytes, &bits, 4);
        data.append(bytes, 4);
      } else {
        uint64_t bits = std::bit_cast<uint64_t>(v);
        if (big_endian) bits = __builtin_bswap64(bits);
        std::memcpy(bytes, &bits, 8);
        data.append(bytes, 8);
      }
    }
  }
  data.resize(data.size() - drop_bytes);
  std::ofstream(path, std::ios::binary) << header << data;
}

// A header of the given version with an arbitrary dict text.
std::string header_v(int major, const std::string& dict) {
  std::string d = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  d.append((64 - (prefix + d.size() + 1) % 64) % 64, ' ');
  d += '\n';
  std::string h = "\x93NUMPY";
  h += static_cast<char>(major);
  h += '\0';
  const uint32_t len = static_cast<uint32_t>(d.size());
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) h += static_cast<char>(len >> (8 * i) & 0xFF);
  return h + d;
}

std::string dict(const std::string& descr, bool fortran, int64_t a, int64_t b) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': (" + std::to_string(a) + ", " + std::to_string(b) + "), }";
}

class ImportExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = temp_store_config("import", 2, "pread");
    config_.import_buffer = 8192;  // many windows per stripe
    store_ = std::move(MatrixStore::open(config_)).value();
    dir_ = make_temp_dir("files");
  }
  void expect_values(const std::string& name, bool f32) {
    auto m = store_->open_matrix(name);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    const StripeGeometry& g = (*m)->geometry();
    for (int64_t i = 0; i < g.stripes; ++i) {
      auto v = read_part_values(**m, i, 0);
      ASSERT_TRUE(v.is_ok());
      for (int64_t c = 0; c < g.n; ++c) {
        for (int64_t r = 0; r < g.rows(i); ++r) {
          double want = generated_value(values_spec, g.n, g.row_begin(i) + r, c);
          if (f32) want = static_cast<float>(want);
          ASSERT_EQ((*v)[c * g.rows(i) + r], want) << "row " << g.row_begin(i) + r << " col " << c;
        }
      }
    }
  }
  void expect_rejected(const std::string& file, const std::string& message) {
    auto info = store_->import_npy("X", file);
    EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(info.status().message(), message);
    EXPECT_FALSE(std::filesystem::exists(config_.paths[0] + "/objects/X"));
  }
  StoreConfig config_;
  std::unique_ptr<MatrixStore> store_;
  std::string dir_;
};

TEST_F(ImportExportTest, COrderV1RoundTripsByteForByte) {
  const std::string in = dir_ + "/a.npy", out = dir_ + "/b.npy";
  write_matrix_file(in, make_npy_header({77, 77}), 77, false, false, false);
  auto info = store_->import_npy("A", in);
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();
  EXPECT_EQ(info->source, "npy " + in);
  expect_values("A", false);
  ASSERT_TRUE(store_->export_npy("A", out).is_ok());
  EXPECT_EQ(*read_whole_file(out, 1 << 20), *read_whole_file(in, 1 << 20));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp-stripesolve"));
}

// A stream buffer holds what the object can fill and no more: two halves of all its stored
// stripes with their slack (so the Fortran path plans one batch), or the budget when that is less.
TEST(StreamBuffer, NoLargerThanTheObjectFills) {
  auto tiny = make_geometry(3, 3);
  auto pl = Placement::make(*tiny, PlacementParams{1, 1, 0, kAlignment});
  ASSERT_TRUE(pl.is_ok());
  EXPECT_EQ(stream_buffer_bytes(*pl, 256 << 20), 2 * (kAlignment + 2 * kAlignment));
  auto g = make_geometry(150, 7);
  pl = Placement::make(*g, PlacementParams{2, 1, 0, kAlignment});
  ASSERT_TRUE(pl.is_ok());
  const uint64_t bytes = stream_buffer_bytes(*pl, uint64_t{1} << 40);
  uint64_t stored = 0;
  for (int64_t i = 0; i < g->stripes; ++i) stored += pl->stored_bytes(i);
  EXPECT_EQ(bytes, 2 * (stored + 2 * kAlignment * g->stripes));
  EXPECT_EQ(plan_column_batches(*pl, bytes / 2, 1 << 20, 8).size(), 1u);
  EXPECT_EQ(stream_buffer_bytes(*pl, 65536), 65536u);
}

// Create, import in both orders and export of small matrices through a store whose import buffer
// is 1 TiB: each takes a buffer of its matrix's size (allocating the budget would fail: no
// machine the tests run on lends 1 TiB), and the values come through.
TEST_F(ImportExportTest, SmallMatricesTakeABufferOfTheirSize) {
  store_.reset();
  config_.import_buffer = uint64_t{1} << 40;
  store_ = std::move(MatrixStore::open(config_)).value();
  const int64_t n = 20;
  ImportOptions options;
  options.stripe_rows = 6;
  const std::string c64 = dir_ + "/small_c.npy", f64 = dir_ + "/small_f.npy";
  write_matrix_file(c64, make_npy_header({n, n}), n, false, false, false);
  write_matrix_file(f64, header_v(1, dict("<f8", true, n, n)), n, true, false, false);
  auto c = store_->import_npy("C", c64, options);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  expect_values("C", false);
  auto f = store_->import_npy("F", f64, options);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  expect_values("F", false);
  const std::string out = dir_ + "/small_out.npy";
  ASSERT_TRUE(store_->export_npy("F", out).is_ok());
  EXPECT_EQ(*read_whole_file(out, 1 << 20), *read_whole_file(c64, 1 << 20));
  auto created = store_->create_generated("G", n, values_spec, 6);
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  expect_values("G", false);
}

// Without an explicit S, the stripe height comes from the hook, which sees the order from the
// header (the daemon's planner); an explicit S wins over it.
TEST_F(ImportExportTest, StripeRowsHookSeesTheOrder) {
  const std::string in = dir_ + "/h.npy";
  write_matrix_file(in, header_v(1, dict("<f8", false, 37, 37)), 37, false, false, false);
  ImportOptions options;
  int64_t seen = 0;
  options.stripe_rows_for = [&](int64_t n) {
    seen = n;
    return int64_t{5};
  };
  auto info = store_->import_npy("H", in, options);
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();
  EXPECT_EQ(seen, 37);
  EXPECT_EQ(info->geometry.stripe_rows, 5);
  expect_values("H", false);
  options.stripe_rows = 7;
  info = store_->import_npy("H7", in, options);
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();
  EXPECT_EQ(info->geometry.stripe_rows, 7);
}

TEST_F(ImportExportTest, FortranOrderV2Float32IsWidened) {
  const std::string in = dir_ + "/f.npy";
  write_matrix_file(in, header_v(2, dict("<f4", true, 131, 131)), 131, true, true, false);
  ASSERT_TRUE(store_->import_npy("F", in).is_ok());
  expect_values("F", true);
}

// Batches over column ranges: n not a multiple of S (a last stripe of 3 rows), several stripes'
// windows per batch, windows that start before their batch's first column (4 KiB alignment), and
// every stripe covered in order, within both bounds.
TEST(ColumnBatches, CoverEveryStripeInOrderWithinTheBounds) {
  for (auto [n, s, batch, staging, item] :
       {std::tuple{150, 7, 256 * 1024, 256 * 1024, 8}, std::tuple{150, 7, 256 * 1024, 64 * 1024, 4},
        std::tuple{300, 64, 512 * 1024, 512 * 1024, 8}, std::tuple{5, 7, 65536, 65536, 8}}) {
    auto g = make_geometry(n, s);
    ASSERT_TRUE(g.is_ok());
    auto pl = Placement::make(*g, PlacementParams{2, 1, 0, kAlignment});
    ASSERT_TRUE(pl.is_ok()) << pl.status().to_string();
    const auto batches = plan_column_batches(*pl, batch, staging, item);
    const std::string tag = std::to_string(n) + "/" + std::to_string(s);
    ASSERT_GE(batches.size(), n > 5 ? 2u : 1u) << tag;
    std::vector<uint64_t> next(static_cast<size_t>(g->stripes), 0);
    size_t widest = 0;
    for (const ColumnBatch& b : batches) {
      uint64_t bytes = 0;
      widest = std::max(widest, b.windows.size());
      EXPECT_LE(static_cast<uint64_t>(b.col_end - b.col_begin) * n * item, staging) << tag;
      for (const StripeWindow& w : b.windows) {
        EXPECT_EQ(w.begin, next[w.stripe]) << tag;
        EXPECT_GT(w.end, w.begin);
        EXPECT_EQ(w.end % kAlignment, 0u);
        const int64_t h = g->rows(w.stripe);
        const uint64_t data_end = std::min(w.end, g->stripe_bytes(w.stripe));
        EXPECT_GE(static_cast<int64_t>(w.begin / 8) / h, b.col_begin) << tag;
        EXPECT_LE((static_cast<int64_t>(data_end / 8) + h - 1) / h, b.col_end) << tag;
        next[w.stripe] = w.end;
        bytes += w.end - w.begin;
      }
      EXPECT_LE(bytes, static_cast<uint64_t>(batch)) << tag;
    }
    for (int64_t i = 0; i < g->stripes; ++i) EXPECT_EQ(next[i], pl->stored_bytes(i)) << tag;
    if (g->stripes > 1) {
      EXPECT_GT(widest, 1u) << tag;
    }
  }
  auto g = make_geometry(150, 7);
  auto pl = Placement::make(*g, PlacementParams{1, 1, 0, kAlignment});
  EXPECT_TRUE(plan_column_batches(*pl, 8192, 8192, 8).empty());  // too small: stripe by stripe
}

// The batched Fortran-order import (buffers large enough to plan batches) against the values,
// for float64 and big-endian float32, n not a multiple of S, and export back to C order; then
// with direct_reads off, both orders read through the page cache.
TEST_F(ImportExportTest, FortranOrderInBatchesOfSeveralStripes) {
  for (auto [n, s, buffer] : {std::tuple{150, 7, 1 << 20}, std::tuple{300, 64, 2 << 20}}) {
    store_.reset();
    config_.import_buffer = buffer;
    store_ = std::move(MatrixStore::open(config_)).value();
    ImportOptions options;
    options.stripe_rows = s;
    const std::string tag = std::to_string(n);
    const std::string f64 = dir_ + "/bf" + tag + ".npy", c64 = dir_ + "/bc" + tag + ".npy";
    const std::string out = dir_ + "/bo" + tag + ".npy";
    write_matrix_file(f64, header_v(1, dict("<f8", true, n, n)), n, true, false, false);
    auto info = store_->import_npy("F" + tag, f64, options);
    ASSERT_TRUE(info.is_ok()) << info.status().to_string();
    expect_values("F" + tag, false);
    write_matrix_file(c64, make_npy_header({n, n}), n, false, false, false);
    ASSERT_TRUE(store_->export_npy("F" + tag, out).is_ok());
    EXPECT_EQ(*read_whole_file(out, 1 << 20), *read_whole_file(c64, 1 << 20)) << tag;
    const std::string f32 = dir_ + "/bs" + tag + ".npy";
    write_matrix_file(f32, header_v(1, dict(">f4", true, n, n)), n, true, true, true);
    ASSERT_TRUE(store_->import_npy("S" + tag, f32, options).is_ok());
    expect_values("S" + tag, true);
    options.direct_reads = false;  // the same batches through the page cache
    ASSERT_TRUE(store_->import_npy("P" + tag, f64, options).is_ok());
    expect_values("P" + tag, false);
    ASSERT_TRUE(store_->import_npy("Q" + tag, c64, options).is_ok());
    expect_values("Q" + tag, false);
  }
}

// A non-finite value and a full disk during a batched Fortran-order import: the reason, and
// nothing of the object left behind.
TEST_F(ImportExportTest, FortranOrderBatchErrorsLeaveNothing) {
  store_.reset();
  config_.import_buffer = 1 << 20;
  store_ = std::move(MatrixStore::open(config_)).value();
  const int64_t n = 150;
  const std::string f = dir_ + "/fnan.npy";
  std::string data(static_cast<size_t>(8 * n * n), '\0');
  const double inf = INFINITY;
  std::memcpy(data.data() + 8 * (140 * n + 100), &inf, 8);  // row 100, column 140
  std::ofstream(f, std::ios::binary) << header_v(1, dict("<f8", true, n, n)) << data;
  ImportOptions options;
  options.stripe_rows = 7;
  auto info = store_->import_npy("X", f, options);
  EXPECT_EQ(info.status().message(), f + ": non-finite value inf at row 100, column 140");
  EXPECT_FALSE(std::filesystem::exists(config_.paths[0] + "/objects/X"));

  StoreConfig inner_config;
  inner_config.io_engine = "pread";
  auto inner = make_io_engine(inner_config);
  ASSERT_TRUE(inner.is_ok());
  auto fault = std::make_shared<FaultEngine>(*inner, FaultPlan{FaultPlan::Kind::kFail, 5, ENOSPC});
  store_.reset();
  store_ = std::move(MatrixStore::open(config_, fault)).value();
  const std::string g = dir_ + "/full.npy";
  write_matrix_file(g, header_v(1, dict("<f8", true, n, n)), n, true, false, false);
  info = store_->import_npy("Y", g, options);
  EXPECT_TRUE(fault->fired());
  EXPECT_EQ(info.status().code(), StatusCode::kNoSpace) << info.status().to_string();
  for (const auto& p : config_.paths) EXPECT_FALSE(std::filesystem::exists(p + "/objects/Y"));
  EXPECT_TRUE(store_->list()->empty());
}

TEST_F(ImportExportTest, V3BigEndianSmallerThanStripe) {
  const std::string in = dir_ + "/v3.npy";
  write_matrix_file(in, header_v(3, dict(">f8", false, 5, 5)), 5, false, false, true);
  ASSERT_TRUE(store_->import_npy("B", in).is_ok());
  expect_values("B", false);
}

// Windows that hold whole rows of the file (one read, one write per window) and windows that
// split columns (the partial columns at their ends), for float64 and big-endian float32.
TEST_F(ImportExportTest, WholeRowWindowsAndSplitColumnsRoundTrip) {
  const int64_t n = 150;
  for (uint64_t buffer : {uint64_t{1} << 20, uint64_t{3} * 4096}) {
    store_.reset();
    config_.import_buffer = buffer;
    store_ = std::move(MatrixStore::open(config_)).value();
    ImportOptions options;
    options.stripe_rows = 7;
    const std::string tag = std::to_string(buffer);
    const std::string in = dir_ + "/w" + tag + ".npy", out = dir_ + "/w" + tag + "_out.npy";
    write_matrix_file(in, make_npy_header({n, n}), n, false, false, false);
    ASSERT_TRUE(store_->import_npy("W" + tag, in, options).is_ok());
    expect_values("W" + tag, false);
    ASSERT_TRUE(store_->export_npy("W" + tag, out).is_ok());
    EXPECT_EQ(*read_whole_file(out, 1 << 20), *read_whole_file(in, 1 << 20)) << tag;
    const std::string f32 = dir_ + "/s" + tag + ".npy";
    write_matrix_file(f32, header_v(1, dict(">f4", false, n, n)), n, false, true, true);
    ASSERT_TRUE(store_->import_npy("S" + tag, f32, options).is_ok());
    expect_values("S" + tag, true);
  }
}

TEST_F(ImportExportTest, BadFilesAreRejectedWithReasons) {
  const std::string f = dir_ + "/bad.npy";
  write_matrix_file(f, header_v(1, dict("<i8", false, 4, 4)), 4, false, false, false);
  expect_rejected(f, f + ": unsupported dtype '<i8' (expected float64 or float32)");
  write_matrix_file(f, header_v(1, dict("<f8", false, 4, 5)), 4, false, false, false);
  expect_rejected(f, f + ": expected a square matrix, got shape (4, 5)");
  write_matrix_file(f, make_npy_header({9, 9}), 9, false, false, false, 8);
  expect_rejected(f, f + ": truncated: expected 648 bytes of data after 128 header bytes, the "
                         "file has 640");
  write_matrix_file(f, "NOTNUMPY..", 2, false, false, false);
  expect_rejected(f, f + ": not an .npy file (bad magic)");
  write_matrix_file(f, header_v(1, "{'descr': '<f8', 'fortran_order': False, "), 2, false, false,
                    false);
  expect_rejected(f, f + ": malformed .npy header");
}

TEST_F(ImportExportTest, NonFiniteValueIsRejectedUnlessAllowed) {
  const std::string f = dir_ + "/nan.npy";
  std::string data(8 * 9, '\0');
  const double nan = std::nan("");
  std::memcpy(data.data() + 8 * 5, &nan, 8);  // row 1, column 2 in C order
  std::ofstream(f, std::ios::binary) << make_npy_header({3, 3}) << data;
  expect_rejected(f, f + ": non-finite value nan at row 1, column 2");
  ImportOptions lax;
  lax.check_finite = false;
  EXPECT_TRUE(store_->import_npy("X", f, lax).is_ok());
}

TEST_F(ImportExportTest, RawWithSidecar) {
  const std::string data = dir_ + "/m.bin", side = dir_ + "/m.json";
  write_matrix_file(data, "", 70, true, true, false);
  std::ofstream(side) << R"({"n": 70, "dtype": "float32", "order": "F"})";
  auto info = store_->import_raw("R", data, side);
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();
  expect_values("R", true);
  std::ofstream(side) << R"({"n": 70, "dtype": "float16"})";
  EXPECT_EQ(store_->import_raw("S", data, side).status().message(),
            side + ": bad or unknown key 'dtype': \"float16\"");
  std::ofstream(side) << R"({"n": 71, "dtype": "float32", "order": "F"})";
  EXPECT_EQ(store_->import_raw("S", data, side).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->list()->size(), 1u);
}

TEST_F(ImportExportTest, ExportErrors) {
  EXPECT_EQ(store_->export_npy("nothing", dir_ + "/x.npy").code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->create_generated("A", 10, values_spec).is_ok());
  EXPECT_EQ(store_->export_npy("A", dir_ + "/missing/x.npy").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace stripesolve::storage
