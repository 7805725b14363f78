#include "storage/npy.h"

#include <cctype>
#include <cstring>

namespace stripesolve::storage {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

uint32_t little_u32(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// A tiny reader of the dict literal numpy writes: string keys; values are strings, True/False or
// tuples of integers.
class DictReader {
 public:
  explicit DictReader(std::string_view s) : s_(s) {}
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool string(std::string& out) {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) return false;
    const char q = s_[i_++];
    const size_t end = s_.find(q, i_);
    if (end == std::string_view::npos) return false;
    out = std::string(s_.substr(i_, end - i_));
    i_ = end + 1;
    return true;
  }
  bool word(std::string& out) {
    skip_space();
    const size_t start = i_;
    while (i_ < s_.size() && std::isalnum(static_cast<unsigned char>(s_[i_]))) ++i_;
    out = std::string(s_.substr(start, i_ - start));
    return !out.empty();
  }
  bool tuple(std::vector<int64_t>& out) {
    if (!eat('(')) return false;
    for (;;) {
      if (eat(')')) return true;
      std::string w;
      if (!word(w)) return false;
      if (!w.empty() && (w.back() == 'L' || w.back() == 'l')) w.pop_back();  // Python 2 longs
      for (char c : w) {
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
      }
      if (w.size() > 18) return false;
      out.push_back(std::stoll(w));
      if (!eat(',')) return eat(')');
    }
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

uint64_t npy_header_bytes(std::string_view first12) {
  if (first12.size() < 12 || first12.substr(0, 6) != kMagic) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(first12.data());
  if (p[6] == 1) return 10 + little_u32(p + 8, 2);
  return 12 + static_cast<uint64_t>(little_u32(p + 8, 4));
}

Result<DenseLayout> parse_npy_header(std::string_view bytes, const std::string& where) {
  const auto bad = [&where](const std::string& what) {
    return Status::invalid_argument(where + ": " + what);
  };
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic) return bad("not an .npy file (bad magic)");
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const int major = p[6];
  if (major < 1 || major > 3) {
    return bad("unsupported .npy version " + std::to_string(major) + "." + std::to_string(p[7]));
  }
  const uint64_t prefix = major == 1 ? 10 : 12;
  if (bytes.size() < prefix) return bad("truncated .npy header");
  const uint64_t len = little_u32(p + 8, major == 1 ? 2 : 4);
  if (bytes.size() < prefix + len) return bad("truncated .npy header");
  DictReader d(bytes.substr(prefix, len));
  std::string descr;
  bool have_order = false, have_shape = false;
  DenseLayout layout;
  layout.data_offset = prefix + len;
  if (!d.eat('{')) return bad("malformed .npy header (expected a dict)");
  while (!d.eat('}')) {
    std::string key;
    if (!d.string(key) || !d.eat(':')) return bad("malformed .npy header");
    if (key == "descr") {
      if (!d.string(descr)) return bad("malformed .npy header: descr");
    } else if (key == "fortran_order") {
      std::string w;
      if (!d.word(w) || (w != "True" && w != "False"))
        return bad("malformed .npy header: fortran_order");
      layout.fortran_order = w == "True";
      have_order = true;
    } else if (key == "shape") {
      if (!d.tuple(layout.shape)) return bad("malformed .npy header: shape");
      have_shape = true;
    } else {
      return bad("unexpected key '" + key + "' in .npy header");
    }
    if (!d.eat(',')) {
      if (!d.eat('}')) return bad("malformed .npy header");
      break;
    }
  }
  if (descr.empty() || !have_order || !have_shape) return bad("incomplete .npy header");
  if (descr == "<f8" || descr == "=f8") {
    layout.item_bytes = 8;
  } else if (descr == ">f8") {
    layout.item_bytes = 8;
    layout.big_endian = true;
  } else if (descr == "<f4" || descr == "=f4") {
    layout.item_bytes = 4;
  } else if (descr == ">f4") {
    layout.item_bytes = 4;
    layout.big_endian = true;
  } else {
    return bad("unsupported dtype '" + descr + "' (expected float64 or float32)");
  }
  return layout;
}

std::string make_npy_header(const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ", ";
  }
  dict += "), }";
  const size_t unpadded = 10 + dict.size() + 1;  // + '\n'
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\0';
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

}  // namespace stripesolve::storage
