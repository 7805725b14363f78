#include "client/tridiag_request.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "protocol/npy.h"

namespace stripesolve::client {
namespace {

// Longer inline lists travel as an uploaded int64 .npy: the JSON header of a frame is limited
// (64 KiB by default) and a list this long is at most ~20 KiB of JSON.
constexpr std::size_t kMaxInlineSizes = 2048;

Result<std::string> read_file(const std::string& path, std::string_view option) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    return Status::from_errno(errno, fmt::format("cannot read {} file '{}'", option, path));
  std::string bytes;
  char buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return Status::from_errno(err, fmt::format("cannot read {} file '{}'", option, path));
  return bytes;
}

bool looks_like_list(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789, -+") == std::string_view::npos;
}

}  // namespace

Result<std::vector<int64_t>> parse_sizes_list(std::string_view text) {
  std::vector<int64_t> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    std::string item(text.substr(pos, comma - pos));
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    char* end = nullptr;
    errno = 0;
    const long long v = item.empty() ? 0 : std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || errno == ERANGE) {
      return Status::invalid_argument(fmt::format("--sizes: '{}' is not a positive integer", item));
    }
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

Result<nlohmann::json> build_tridiag_job(Connection& conn, const TridiagRequest& r) {
  const std::pair<const char*, const std::string*> arrays[] = {
      {"dl", &r.dl_path}, {"d", &r.d_path}, {"du", &r.du_path}, {"rhs", &r.rhs_path}};
  std::vector<std::string> images;
  for (const auto& [name, path] : arrays) {
    STRIPESOLVE_ASSIGN_OR_RETURN(std::string bytes, read_file(*path, std::string("--") + name));
    images.push_back(std::move(bytes));
  }
  // --sizes: an existing file is read as .npy, else the text must be a list.
  std::string sizes_image;
  std::vector<int64_t> sizes_list;
  if (!r.sizes.empty()) {
    if (std::filesystem::exists(r.sizes) || !looks_like_list(r.sizes)) {
      STRIPESOLVE_ASSIGN_OR_RETURN(sizes_image, read_file(r.sizes, "--sizes"));
    } else {
      STRIPESOLVE_ASSIGN_OR_RETURN(sizes_list, parse_sizes_list(r.sizes));
      if (sizes_list.size() > kMaxInlineSizes) {
        sizes_image = protocol::make_npy_header({static_cast<int64_t>(sizes_list.size())}, false,
                                                protocol::NpyDtype::kInt64);
        sizes_image.append(reinterpret_cast<const char*>(sizes_list.data()),
                           sizes_list.size() * sizeof(int64_t));
      }
    }
  }
  nlohmann::json job = {{"type", "tridiag_solve"},
                        {"layout", r.layout},
                        {"algorithm", r.algorithm},
                        {"unstable_ok", r.unstable_ok},
                        {"device", r.device}};
  for (std::size_t k = 0; k < images.size(); ++k) {
    STRIPESOLVE_ASSIGN_OR_RETURN(uint64_t upload, conn.upload(images[k]));
    std::string().swap(images[k]);
    job[arrays[k].first] = {{"upload", upload}};
  }
  if (!sizes_image.empty()) {
    STRIPESOLVE_ASSIGN_OR_RETURN(uint64_t upload, conn.upload(sizes_image));
    job["sizes"] = {{"upload", upload}};
  } else if (!sizes_list.empty()) {
    job["sizes"] = sizes_list;
  }
  return job;
}

}  // namespace stripesolve::client
