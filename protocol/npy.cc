#include "protocol/npy.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace stripesolve::protocol {
namespace {
constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLen = 6;
}  // namespace

std::string make_npy_header(const std::vector<int64_t>& shape, bool fortran_order, NpyDtype dtype) {
  std::string shape_text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    shape_text += std::to_string(shape[i]);
    shape_text += (shape.size() == 1 || i + 1 < shape.size()) ? "," : "";
    if (i + 1 < shape.size()) shape_text += " ";
  }
  shape_text += ")";
  const char* descr = dtype == NpyDtype::kFloat64   ? "<f8"
                      : dtype == NpyDtype::kFloat32 ? "<f4"
                      : dtype == NpyDtype::kInt64   ? "<i8"
                                                    : "<i4";
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': {}, }}", descr,
                                 fortran_order ? "True" : "False", shape_text);
  const bool v2 = dict.size() + 1 + 10 > 65535;
  const size_t prefix = kNpyMagicLen + 2 + (v2 ? 4 : 2);
  size_t total = prefix + dict.size() + 1;
  const size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict.push_back('\n');
  std::string out(kNpyMagic, kNpyMagicLen);
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  const uint32_t len = static_cast<uint32_t>(dict.size());
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>((len >> 8) & 0xff));
  if (v2) {
    out.push_back(static_cast<char>((len >> 16) & 0xff));
    out.push_back(static_cast<char>((len >> 24) & 0xff));
  }
  out += dict;
  return out;
}

namespace {

size_t dtype_bytes(NpyDtype dtype) {
  return dtype == NpyDtype::kFloat64 || dtype == NpyDtype::kInt64 ? 8 : 4;
}

// A dtype and its byte order, from the header's descr.
struct Descr {
  NpyDtype dtype;
  bool big_endian;
};

// '<f8', 'f8', '=f8' (native is little-endian here) and '>f8' (big-endian), and the same for f4,
// i8, i4.
std::optional<Descr> parse_descr(std::string descr) {
  bool big = false;
  if (!descr.empty() && (descr[0] == '<' || descr[0] == '=' || descr[0] == '>')) {
    big = descr[0] == '>';
    descr.erase(0, 1);
  }
  if (descr == "f8") return Descr{NpyDtype::kFloat64, big};
  if (descr == "f4") return Descr{NpyDtype::kFloat32, big};
  if (descr == "i8") return Descr{NpyDtype::kInt64, big};
  if (descr == "i4") return Descr{NpyDtype::kInt32, big};
  return std::nullopt;
}

// Where the value of 'key' (or "key") starts in a header dict such as
// "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", or npos. A hand-written scan
// rather than std::regex: the dict is a Python literal of three known keys, and GCC 12's
// <regex> trips -Wmaybe-uninitialized under the sanitizers.
size_t value_of(std::string_view dict, std::string_view key) {
  for (const char quote : {'\'', '"'}) {
    const std::string pattern = quote + std::string(key) + quote;
    size_t p = dict.find(pattern);
    if (p == std::string_view::npos) continue;
    p += pattern.size();
    while (p < dict.size() && dict[p] == ' ') ++p;
    if (p >= dict.size() || dict[p] != ':') return std::string_view::npos;
    ++p;
    while (p < dict.size() && dict[p] == ' ') ++p;
    return p < dict.size() ? p : std::string_view::npos;
  }
  return std::string_view::npos;
}

// Parses the header of any dtype parse_descr knows; `descr` receives the dtype text as written.
Result<NpyHeader> parse_header(std::string_view bytes, std::string* descr) {
  // The magic first, on what there is of it: a short text file is "not a .npy file".
  if (!bytes.empty() &&
      std::memcmp(bytes.data(), kNpyMagic, std::min(bytes.size(), kNpyMagicLen)) != 0) {
    return Status::invalid_argument("npy: bad magic (not a .npy file)");
  }
  if (bytes.size() < kNpyMagicLen + 4) {
    return Status::failed_precondition(
        fmt::format("npy: need at least {} bytes for the preamble", kNpyMagicLen + 4));
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  if (major < 1 || major > 3)
    return Status::invalid_argument(fmt::format("npy: unsupported version {}", major));
  size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_bytes) return Status::failed_precondition("npy: truncated preamble");
  uint32_t hlen = 0;
  for (size_t i = 0; i < len_bytes; ++i)
    hlen |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
  const size_t data_offset = 8 + len_bytes + hlen;
  if (hlen > (1u << 20))
    return Status::invalid_argument(fmt::format("npy: header of {} bytes is too long", hlen));
  if (bytes.size() < data_offset) {
    return Status::failed_precondition(
        fmt::format("npy: need {} bytes for the header", data_offset));
  }
  const std::string_view dict = bytes.substr(8 + len_bytes, hlen);
  const size_t descr_at = value_of(dict, "descr");
  if (descr_at == std::string_view::npos || (dict[descr_at] != '\'' && dict[descr_at] != '"')) {
    return Status::invalid_argument("npy: header has no 'descr'");
  }
  const size_t descr_end = dict.find(dict[descr_at], descr_at + 1);
  if (descr_end == std::string_view::npos)
    return Status::invalid_argument("npy: header has no 'descr'");
  *descr = std::string(dict.substr(descr_at + 1, descr_end - descr_at - 1));
  NpyHeader h;
  h.data_offset = data_offset;
  const std::optional<Descr> d = parse_descr(*descr);
  h.dtype = d ? d->dtype : NpyDtype::kFloat64;
  h.big_endian = d && d->big_endian;
  const size_t order_at = value_of(dict, "fortran_order");
  if (order_at != std::string_view::npos && dict.substr(order_at, 4) == "True") {
    h.fortran_order = true;
  } else if (order_at == std::string_view::npos || dict.substr(order_at, 5) != "False") {
    return Status::invalid_argument("npy: header has no 'fortran_order'");
  }
  const size_t shape_at = value_of(dict, "shape");
  const size_t shape_end = shape_at == std::string_view::npos ? shape_at : dict.find(')', shape_at);
  if (shape_at == std::string_view::npos || dict[shape_at] != '(' ||
      shape_end == std::string_view::npos) {
    return Status::invalid_argument("npy: header has no 'shape'");
  }
  const std::string dims(dict.substr(shape_at + 1, shape_end - shape_at - 1));
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t comma = dims.find(',', pos);
    std::string item =
        dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(item.c_str(), &end, 10);
      if (*end != '\0' || v < 0 || errno == ERANGE) {
        return Status::invalid_argument(fmt::format("npy: bad dimension '{}'", item));
      }
      h.shape.push_back(v);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (h.shape.empty() || h.shape.size() > 2) {
    return Status::invalid_argument(fmt::format("npy: {} dimensions, need 1 or 2", h.shape.size()));
  }
  return h;
}

// The elements in C order (a Fortran-ordered 2-D array is transposed).
template <typename T>
std::vector<T> c_order_values(std::string_view bytes, const NpyHeader& h) {
  const char* data = bytes.data() + h.data_offset;
  const size_t item = dtype_bytes(h.dtype);
  const int64_t r = h.rows(), c = h.cols();
  std::vector<T> out(static_cast<size_t>(r * c));
  if (!h.fortran_order || h.shape.size() == 1) {
    for (int64_t k = 0; k < r * c; ++k) out[k] = npy_element<T>(data + item * k, h);
  } else {
    for (int64_t j = 0; j < c; ++j) {
      for (int64_t i = 0; i < r; ++i) out[i * c + j] = npy_element<T>(data + item * (j * r + i), h);
    }
  }
  return out;
}

}  // namespace

std::string_view npy_dtype_name(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::kFloat64:
      return "float64";
    case NpyDtype::kFloat32:
      return "float32";
    case NpyDtype::kInt64:
      return "int64";
    case NpyDtype::kInt32:
      return "int32";
  }
  return "?";
}

bool is_float(NpyDtype dtype) {
  return dtype == NpyDtype::kFloat64 || dtype == NpyDtype::kFloat32;
}

std::string format_shape(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

Result<NpyHeader> parse_npy_header(std::string_view bytes) {
  std::string descr;
  STRIPESOLVE_ASSIGN_OR_RETURN(NpyHeader h, parse_header(bytes, &descr));
  const std::optional<Descr> d = parse_descr(descr);
  if (!d || d->dtype != NpyDtype::kFloat64) {
    return Status::invalid_argument(
        fmt::format("npy: dtype '{}' is not supported (need float64 '<f8' or '>f8')", descr));
  }
  return h;
}

Result<NpyHeader> inspect_npy(std::string_view bytes) {
  return inspect_npy_header(bytes, bytes.size());
}

size_t npy_dtype_bytes(NpyDtype dtype) {
  return dtype_bytes(dtype);
}

Result<NpyHeader> inspect_npy_header(std::string_view prefix, uint64_t file_size) {
  std::string descr;
  auto parsed = parse_header(prefix, &descr);
  if (!parsed.is_ok()) {
    // More of the file may hold the header; a whole file whose header does not fit is
    // malformed, not "read more bytes".
    if (parsed.status().code() == StatusCode::kFailedPrecondition && prefix.size() < file_size) {
      return parsed.status();
    }
    return Status::invalid_argument(parsed.status().message());
  }
  NpyHeader h = std::move(parsed).value();
  if (!parse_descr(descr).has_value()) {
    return Status::invalid_argument(
        fmt::format("npy: dtype '{}' is not supported (need float64 'f8', float32 'f4', int64 "
                    "'i8' or int32 'i4', either byte order)",
                    descr));
  }
  const int64_t r = h.rows(), c = h.cols();
  const int64_t item = static_cast<int64_t>(dtype_bytes(h.dtype));
  if (r > 0 && c > INT64_MAX / item / r) return Status::invalid_argument("npy: shape overflows");
  const uint64_t need = h.data_offset + static_cast<uint64_t>(r * c * item);
  if (file_size != need) {
    return Status::invalid_argument(fmt::format("npy: shape {} of {} needs {} bytes, file has {}",
                                                format_shape(h.shape), npy_dtype_name(h.dtype),
                                                need, file_size));
  }
  return h;
}

Result<std::vector<double>> npy_float_values(std::string_view bytes, const NpyHeader& header) {
  if (!is_float(header.dtype)) {
    return Status::invalid_argument(
        fmt::format("npy: dtype {} where a floating-point array (float64 or float32) is needed",
                    npy_dtype_name(header.dtype)));
  }
  return c_order_values<double>(bytes, header);
}

Result<std::vector<int64_t>> npy_int_values(std::string_view bytes, const NpyHeader& header) {
  if (is_float(header.dtype)) {
    return Status::invalid_argument(
        fmt::format("npy: dtype {} where an integer array (int64 or int32) is needed",
                    npy_dtype_name(header.dtype)));
  }
  return c_order_values<int64_t>(bytes, header);
}

Result<std::vector<double>> npy_to_column_major(std::string_view bytes, int64_t* rows,
                                                int64_t* cols) {
  STRIPESOLVE_ASSIGN_OR_RETURN(NpyHeader h, parse_npy_header(bytes));
  const int64_t r = h.rows(), c = h.cols();
  if (r > 0 && c > INT64_MAX / 8 / r) return Status::invalid_argument("npy: shape overflows");
  const size_t need = h.data_offset + static_cast<size_t>(r * c) * 8;
  if (bytes.size() != need) {
    return Status::invalid_argument(
        fmt::format("npy: shape ({}, {}) needs {} bytes, file has {}", r, c, need, bytes.size()));
  }
  std::vector<double> out(static_cast<size_t>(r * c));
  const char* data = bytes.data() + h.data_offset;
  if ((h.fortran_order || c == 1) && !h.big_endian) {
    std::memcpy(out.data(), data, out.size() * 8);
  } else {
    for (int64_t k = 0; k < r * c; ++k) {  // file order
      const int64_t i = h.fortran_order ? k % r : k / c, j = h.fortran_order ? k / r : k % c;
      out[static_cast<size_t>(j * r + i)] = npy_element<double>(data + 8 * k, h);
    }
  }
  *rows = r;
  *cols = c;
  return out;
}

}  // namespace stripesolve::protocol
