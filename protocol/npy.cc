#include "protocol/npy.h"

#include <cstring>
#include <regex>

#include <fmt/format.h>

namespace stripesolve::protocol {
namespace {
constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLen = 6;
}  // namespace

std::string make_npy_header(const std::vector<int64_t>& shape, bool fortran_order) {
  std::string shape_text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    shape_text += std::to_string(shape[i]);
    shape_text += (shape.size() == 1 || i + 1 < shape.size()) ? "," : "";
    if (i + 1 < shape.size()) shape_text += " ";
  }
  shape_text += ")";
  std::string dict = fmt::format("{{'descr': '<f8', 'fortran_order': {}, 'shape': {}, }}",
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

Result<NpyHeader> parse_npy_header(std::string_view bytes) {
  if (bytes.size() < kNpyMagicLen + 4) {
    return Status::failed_precondition(fmt::format("npy: need at least {} bytes for the preamble",
                                                   kNpyMagicLen + 4));
  }
  if (std::memcmp(bytes.data(), kNpyMagic, kNpyMagicLen) != 0) {
    return Status::invalid_argument("npy: bad magic (not a .npy file)");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  if (major < 1 || major > 3) return Status::invalid_argument(fmt::format("npy: unsupported version {}", major));
  size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_bytes) return Status::failed_precondition("npy: truncated preamble");
  uint32_t hlen = 0;
  for (size_t i = 0; i < len_bytes; ++i) hlen |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
  const size_t data_offset = 8 + len_bytes + hlen;
  if (hlen > (1u << 20)) return Status::invalid_argument(fmt::format("npy: header of {} bytes is too long", hlen));
  if (bytes.size() < data_offset) {
    return Status::failed_precondition(fmt::format("npy: need {} bytes for the header", data_offset));
  }
  const std::string dict(bytes.substr(8 + len_bytes, hlen));
  std::smatch m;
  static const std::regex descr_re(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex order_re(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape_re(R"('shape'\s*:\s*\(([^)]*)\))");
  if (!std::regex_search(dict, m, descr_re)) return Status::invalid_argument("npy: header has no 'descr'");
  if (m[1] != "<f8" && m[1] != "f8") {
    return Status::invalid_argument(fmt::format("npy: dtype '{}' is not supported (need float64 '<f8')",
                                                m[1].str()));
  }
  NpyHeader h;
  h.data_offset = data_offset;
  if (!std::regex_search(dict, m, order_re)) return Status::invalid_argument("npy: header has no 'fortran_order'");
  h.fortran_order = m[1] == "True";
  if (!std::regex_search(dict, m, shape_re)) return Status::invalid_argument("npy: header has no 'shape'");
  std::string dims = m[1];
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t comma = dims.find(',', pos);
    std::string item = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) {
      char* end = nullptr;
      long long v = std::strtoll(item.c_str(), &end, 10);
      if (*end != '\0' || v < 0) return Status::invalid_argument(fmt::format("npy: bad dimension '{}'", item));
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

Result<std::vector<double>> npy_to_column_major(std::string_view bytes, int64_t* rows, int64_t* cols) {
  STRIPESOLVE_ASSIGN_OR_RETURN(NpyHeader h, parse_npy_header(bytes));
  const int64_t r = h.rows(), c = h.cols();
  if (r > 0 && c > INT64_MAX / 8 / r) return Status::invalid_argument("npy: shape overflows");
  const size_t need = h.data_offset + static_cast<size_t>(r * c) * 8;
  if (bytes.size() != need) {
    return Status::invalid_argument(fmt::format("npy: shape ({}, {}) needs {} bytes, file has {}", r, c,
                                                need, bytes.size()));
  }
  std::vector<double> out(static_cast<size_t>(r * c));
  const char* data = bytes.data() + h.data_offset;
  if (h.fortran_order || c == 1) {
    std::memcpy(out.data(), data, out.size() * 8);
  } else {
    for (int64_t i = 0; i < r; ++i) {
      for (int64_t j = 0; j < c; ++j) std::memcpy(&out[j * r + i], data + 8 * (i * c + j), 8);
    }
  }
  *rows = r;
  *cols = c;
  return out;
}

}  // namespace stripesolve::protocol
