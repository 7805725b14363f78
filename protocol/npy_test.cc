#include "protocol/npy.h"

#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

namespace stripesolve::protocol {
namespace {

TEST(NpyTest, HeaderRoundTripIsAlignedTo64) {
  for (const auto& shape : std::vector<std::vector<int64_t>>{{5}, {1000000, 3}}) {
    std::string h = make_npy_header(shape, false);
    EXPECT_EQ(h.size() % 64, 0u);
    EXPECT_EQ(h.back(), '\n');
    auto parsed = parse_npy_header(h);
    ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->shape, shape);
    EXPECT_FALSE(parsed->fortran_order);
    EXPECT_EQ(parsed->data_offset, h.size());
  }
  EXPECT_NE(make_npy_header({5}, false).find("'shape': (5,)"), std::string::npos);
  EXPECT_NE(make_npy_header({4, 2}, true).find("'shape': (4, 2)"), std::string::npos);
}

TEST(NpyTest, ToColumnMajorFromCOrder) {
  std::string img = make_npy_header({2, 3}, false);
  const double vals[] = {1, 2, 3, 4, 5, 6};  // rows (1,2,3), (4,5,6)
  img.append(reinterpret_cast<const char*>(vals), sizeof(vals));
  int64_t r = 0, c = 0;
  auto out = npy_to_column_major(img, &r, &c);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(r, 2);
  EXPECT_EQ(c, 3);
  EXPECT_EQ(*out, (std::vector<double>{1, 4, 2, 5, 3, 6}));
}

TEST(NpyTest, Errors) {
  EXPECT_EQ(parse_npy_header("NOTNUMPYxxxxxxxx").status().message(),
            "npy: bad magic (not a .npy file)");
  std::string h = make_npy_header({3}, false);
  std::string i4 = h;
  i4.replace(i4.find("<f8"), 3, "<i4");
  EXPECT_EQ(parse_npy_header(i4).status().message(),
            "npy: dtype '<i4' is not supported (need float64 '<f8' or '>f8')");
  int64_t r, c;
  EXPECT_EQ(npy_to_column_major(h + "abc", &r, &c).status().message(),
            "npy: shape (3, 1) needs 152 bytes, file has 131");
  EXPECT_EQ(parse_npy_header(h.substr(0, 20)).status().code(), StatusCode::kFailedPrecondition);
}

// A v1.0 header with any descr and shape text, as NumPy would write it.
std::string header(const std::string& descr, const std::string& shape, bool fortran) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape + ", }";
  dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  return out + dict;
}

std::string image(const std::string& descr, const std::string& shape, bool fortran,
                  std::string_view data) {
  return header(descr, shape, fortran) + std::string(data);
}

template <typename T>
std::string_view raw(const std::vector<T>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

TEST(NpyTest, InspectReadsEveryDtypeAndChecksTheLength) {
  const std::vector<float> f32 = {1.5f, -2.0f, 0.1f, 4.0f, 5.0f, 6.0f};
  const std::string img = image("<f4", "(2, 3)", false, raw(f32));
  auto h = inspect_npy(img);
  ASSERT_TRUE(h.is_ok()) << h.status().to_string();
  EXPECT_EQ(h->dtype, NpyDtype::kFloat32);
  EXPECT_EQ(h->shape, (std::vector<int64_t>{2, 3}));
  auto v = npy_float_values(img, *h);
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ((*v)[2], static_cast<double>(0.1f));  // widened exactly
  EXPECT_EQ((*v)[5], 6.0);
  EXPECT_EQ(npy_int_values(img, *h).status().message(),
            "npy: dtype float32 where an integer array (int64 or int32) is needed");
  const size_t need = header("<f4", "(2, 3)", false).size() + 24;
  EXPECT_EQ(inspect_npy(img.substr(0, img.size() - 2)).status().message(),
            "npy: shape (2, 3) of float32 needs " + std::to_string(need) + " bytes, file has " +
                std::to_string(need - 2));

  const std::vector<int64_t> i64 = {3, 5, 2};
  const std::string ints = image("<i8", "(3,)", false, raw(i64));
  auto hi = inspect_npy(ints);
  ASSERT_TRUE(hi.is_ok());
  EXPECT_EQ(*npy_int_values(ints, *hi), i64);
  EXPECT_EQ(npy_float_values(ints, *hi).status().message(),
            "npy: dtype int64 where a floating-point array (float64 or float32) is needed");
  const std::vector<int32_t> i32 = {7, -1};
  const std::string small = image("<i4", "(2,)", false, raw(i32));
  EXPECT_EQ(*npy_int_values(small, *inspect_npy(small)), (std::vector<int64_t>{7, -1}));

  EXPECT_EQ(inspect_npy(image("<c16", "(1,)", false, std::string(16, '\0'))).status().message(),
            "npy: dtype '<c16' is not supported (need float64 'f8', float32 'f4', int64 'i8' or "
            "int32 'i4', either byte order)");
  EXPECT_EQ(inspect_npy(image("<f8", "()", false, std::string(8, '\0'))).status().message(),
            "npy: 0 dimensions, need 1 or 2");
  EXPECT_EQ(inspect_npy("1 2\n").status().message(), "npy: bad magic (not a .npy file)");
  // A truncated whole file is malformed input, not a request for more bytes.
  EXPECT_EQ(inspect_npy(img.substr(0, 20)).status().code(), StatusCode::kInvalidArgument);
}

TEST(NpyTest, FortranOrderIsTransposedToCOrder) {
  const std::vector<double> cols = {1, 4, 2, 5, 3, 6};  // (2, 3) column by column
  const std::string img = image("<f8", "(2, 3)", true, raw(cols));
  auto h = inspect_npy(img);
  ASSERT_TRUE(h.is_ok());
  EXPECT_EQ(*npy_float_values(img, *h), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

// The bytes of `values` with each element's bytes reversed: what NumPy writes for '>f8' etc.
template <typename T>
std::string big_endian(const std::vector<T>& values) {
  std::string out;
  for (const T& v : values) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    std::reverse(b, b + sizeof(T));
    out.append(b, sizeof(T));
  }
  return out;
}

// Issue 17: the right-hand sides and tridiagonal arrays take what `matrix import` takes, big-endian
// files included (NumPy writes them for dtype('>f8'), and some Fortran and MATLAB exports do).
TEST(NpyTest, BigEndianElementsAreSwappedAsTheyAreRead) {
  const std::vector<double> cols = {1.5, -4, 2, 5e-300, 3, 6e300};  // (2, 3) column by column
  const std::string f8 = image(">f8", "(2, 3)", true, big_endian(cols));
  auto h = inspect_npy(f8);
  ASSERT_TRUE(h.is_ok()) << h.status().to_string();
  EXPECT_TRUE(h->big_endian);
  EXPECT_EQ(*npy_float_values(f8, *h), (std::vector<double>{1.5, 2, 3, -4, 5e-300, 6e300}));
  int64_t r = 0, c = 0;
  EXPECT_EQ(*npy_to_column_major(f8, &r, &c), cols);
  const std::vector<double> rows = {1.5, 2, 3, -4, 5e-300, 6e300};  // the same, C order
  EXPECT_EQ(*npy_to_column_major(image(">f8", "(2, 3)", false, big_endian(rows)), &r, &c), cols);
  EXPECT_EQ(*npy_to_column_major(image(">f8", "(6,)", false, big_endian(rows)), &r, &c), rows);

  const std::vector<float> f = {0.25f, -3.0f};
  const std::string f4 = image(">f4", "(2,)", false, big_endian(f));
  EXPECT_EQ(*npy_float_values(f4, *inspect_npy(f4)), (std::vector<double>{0.25, -3.0}));
  const std::vector<int64_t> i64 = {3, -5, int64_t{1} << 40};
  const std::string i8 = image(">i8", "(3,)", false, big_endian(i64));
  EXPECT_EQ(*npy_int_values(i8, *inspect_npy(i8)), i64);
  const std::vector<int32_t> i32 = {7, -1};
  const std::string i4 = image(">i4", "(2,)", false, big_endian(i32));
  EXPECT_EQ(*npy_int_values(i4, *inspect_npy(i4)), (std::vector<int64_t>{7, -1}));
  // Little-endian spelled three ways reads the same.
  for (const char* d : {"<f8", "=f8", "f8"}) {
    const std::string img = image(d, "(2,)", false, raw(std::vector<double>{1, 2}));
    auto hd = inspect_npy(img);
    ASSERT_TRUE(hd.is_ok()) << d;
    EXPECT_FALSE(hd->big_endian) << d;
    EXPECT_EQ(*npy_float_values(img, *hd), (std::vector<double>{1, 2})) << d;
  }
}

TEST(NpyTest, IntegerHeaderRoundTrip) {
  const std::vector<int64_t> sizes = {4, 1, 9};
  const std::string img = make_npy_header({3}, false, NpyDtype::kInt64) + std::string(raw(sizes));
  auto h = inspect_npy(img);
  ASSERT_TRUE(h.is_ok()) << h.status().to_string();
  EXPECT_EQ(h->dtype, NpyDtype::kInt64);
  EXPECT_EQ(*npy_int_values(img, *h), sizes);
}

// A v1.0 image around any dict text.
std::string with_dict(std::string dict, std::string_view data) {
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  return out + dict + std::string(data);
}

TEST(NpyTest, HeaderDictIsParsedByKey) {
  const std::vector<double> v = {1, 2};
  // Other writers: double quotes, other key order, no trailing comma.
  auto h =
      inspect_npy(with_dict(R"({"shape": (2,), "fortran_order": False, "descr": "<f8"})", raw(v)));
  ASSERT_TRUE(h.is_ok()) << h.status().to_string();
  EXPECT_EQ(h->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(
      inspect_npy(with_dict("{'descr': '<f8', 'fortran_order': False}", raw(v))).status().message(),
      "npy: header has no 'shape'");
  EXPECT_EQ(inspect_npy(with_dict("{'descr': '<f8', 'shape': (2,)}", raw(v))).status().message(),
            "npy: header has no 'fortran_order'");
  EXPECT_EQ(inspect_npy(with_dict("{'descr': <f8, 'fortran_order': False, 'shape': (2,)}", raw(v)))
                .status()
                .message(),
            "npy: header has no 'descr'");
  EXPECT_EQ(
      inspect_npy(with_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (2, x)}", raw(v)))
          .status()
          .message(),
      "npy: bad dimension 'x'");
}

TEST(NpyTest, FormatShape) {
  EXPECT_EQ(format_shape({5}), "(5,)");
  EXPECT_EQ(format_shape({50, 257}), "(50, 257)");
}

}  // namespace
}  // namespace stripesolve::protocol
