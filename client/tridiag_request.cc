#include "client/tridiag_request.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "protocol/npy.h"

namespace stripesolve::client {
namespace {

// Longer inline lists travel as an int64 .npy file: the JSON header of a frame is limited
// (64 KiB by default) and a list this long is at most ~20 KiB of JSON.
constexpr std::size_t kMaxInlineSizes = 2048;

// A long --sizes list as an int64 .npy in an anonymous file (memfd: a regular file that only
// this process and the daemon ever see), passed like a --sizes file.
Result<UniqueFd> sizes_file(const std::vector<int64_t>& sizes) {
  UniqueFd fd(::memfd_create("stripesolve-sizes", MFD_CLOEXEC));
  if (!fd.valid()) return Status::from_errno(errno, "memfd_create for --sizes");
  std::string image = protocol::make_npy_header({static_cast<int64_t>(sizes.size())}, false,
                                                protocol::NpyDtype::kInt64);
  image.append(reinterpret_cast<const char*>(sizes.data()), sizes.size() * sizeof(int64_t));
  size_t done = 0;
  while (done < image.size()) {
    const ssize_t n = ::write(fd.get(), image.data() + done, image.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::from_errno(errno, "write --sizes list");
    done += static_cast<size_t>(n);
  }
  return fd;
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

Result<JobRequest> build_tridiag_job(const TridiagRequest& r) {
  JobRequest req;
  req.job = {{"type", "tridiag_solve"},      {"layout", r.layout},     {"algorithm", r.algorithm},
             {"unstable_ok", r.unstable_ok}, {"fallback", r.fallback}, {"device", r.device}};
  const std::pair<const char*, const std::string*> arrays[] = {
      {"dl", &r.dl_path}, {"d", &r.d_path}, {"du", &r.du_path}, {"rhs", &r.rhs_path}};
  for (const auto& [name, path] : arrays) {
    STRIPESOLVE_ASSIGN_OR_RETURN(UniqueFd fd, open_input(*path, std::string("--") + name));
    req.job[name] = req.pass(std::move(fd));
  }
  // --sizes: an existing file is passed as .npy, else the text must be a list.
  if (!r.sizes.empty()) {
    if (std::filesystem::exists(r.sizes) || !looks_like_list(r.sizes)) {
      STRIPESOLVE_ASSIGN_OR_RETURN(UniqueFd fd, open_input(r.sizes, "--sizes"));
      req.job["sizes"] = req.pass(std::move(fd));
    } else {
      STRIPESOLVE_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, parse_sizes_list(r.sizes));
      if (sizes.size() > kMaxInlineSizes) {
        STRIPESOLVE_ASSIGN_OR_RETURN(UniqueFd fd, sizes_file(sizes));
        req.job["sizes"] = req.pass(std::move(fd));
      } else {
        req.job["sizes"] = sizes;
      }
    }
  }
  if (!r.out_path.empty()) {
    STRIPESOLVE_ASSIGN_OR_RETURN(req.job["out"], req.pass_output(r.out_path, "--out"));
  }
  return req;
}

}  // namespace stripesolve::client
