#include "client/local_files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace stripesolve::client {

Result<UniqueFd> open_input(const std::string& path, std::string_view option) {
  const auto what = [&] { return fmt::format("cannot read {} file '{}'", option, path); };
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return Status::from_errno(errno, what());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::from_errno(errno, what());
  if (!S_ISREG(st.st_mode)) {
    return Status::invalid_argument(
        what() + (S_ISDIR(st.st_mode) ? ": it is a directory" : ": not a regular file"));
  }
  return fd;
}

Result<OutputFile> OutputFile::create(const std::string& target, std::string_view option) {
  if (target.empty()) return Status::invalid_argument(fmt::format("{}: empty path", option));
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::invalid_argument(
        fmt::format("cannot write {} file '{}': it is a directory", option, target));
  }
  const size_t slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : target.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  std::string tmpl =
      (slash == std::string::npos ? std::string() : dir) + "." + base + ".stripesolve-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  UniqueFd fd(::mkostemp(name.data(), O_CLOEXEC));
  if (!fd.valid()) {
    return Status::from_errno(errno, fmt::format("cannot write {} file '{}': cannot create a "
                                                 "temporary file in {}",
                                                 option, target, dir));
  }
  return OutputFile(std::move(fd), target, std::string(name.data()));
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : fd_(std::move(other.fd_)),
      target_(std::move(other.target_)),
      temp_(std::exchange(other.temp_, std::string())) {}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    discard();
    fd_ = std::move(other.fd_);
    target_ = std::move(other.target_);
    temp_ = std::exchange(other.temp_, std::string());
  }
  return *this;
}

OutputFile::~OutputFile() {
  discard();
}

void OutputFile::discard() {
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  fd_.reset();
}

Status OutputFile::commit() {
  if (temp_.empty() || !fd_.valid())
    return Status::failed_precondition("the output was not created");
  Status st;
  if (::fsync(fd_.get()) != 0) st = Status::from_errno(errno, "fsync " + temp_);
  if (st.is_ok()) {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    if (::fchmod(fd_.get(), 0666 & ~mask) != 0) st = Status::from_errno(errno, "chmod " + temp_);
  }
  if (st.is_ok() && std::rename(temp_.c_str(), target_.c_str()) != 0) {
    st = Status::from_errno(errno, "rename " + temp_ + " to " + target_);
  }
  if (!st.is_ok()) {
    discard();
    return st;
  }
  temp_.clear();
  fd_.reset();
  return Status::ok();
}

}  // namespace stripesolve::client
