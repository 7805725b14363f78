#include "daemon/job_files.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <set>

#include <fmt/format.h>

#include "daemon/job_manager.h"

namespace stripesolve::daemon {
namespace {

// A descriptor index: a non-negative integer (JSON built in memory may hold it signed).
bool is_index(const nlohmann::json& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 0;
}

std::string_view file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a pipe";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// A descriptor the daemon may read or write: an open (not O_PATH) regular file.
Status check_regular(int fd, std::string_view field) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return Status::from_errno(errno, fmt::format("field '{}': fcntl", field));
#ifdef O_PATH
  if ((flags & O_PATH) != 0) {
    return Status::invalid_argument(
        fmt::format("field '{}': the descriptor is an O_PATH handle, not an open file", field));
  }
#endif
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return Status::from_errno(errno, fmt::format("field '{}': fstat", field));
  if (!S_ISREG(st.st_mode)) {
    return Status::invalid_argument(
        fmt::format("field '{}': the descriptor is {}; only regular files are read or written",
                    field, file_type_name(st.st_mode)));
  }
  return Status::ok();
}

Result<int> passed_file(const JobContext& ctx, std::string_view field) {
  const nlohmann::json& job = ctx.params();
  if (!names_file(job, field)) {
    return Status::invalid_argument(fmt::format("field '{}' must be {{\"fd\": i}}", field));
  }
  const nlohmann::json& index = job[field]["fd"];
  const int fd = is_index(index) ? ctx.file(index.get<size_t>()) : -1;
  if (fd < 0) {
    return Status::invalid_argument(
        fmt::format("field '{}': no descriptor {} was passed", field, index.dump()));
  }
  STRIPESOLVE_RETURN_IF_ERROR(check_regular(fd, field));
  return fd;
}

}  // namespace

bool names_file(const nlohmann::json& job, std::string_view field) {
  auto it = job.find(field);
  return it != job.end() && it->is_object() && it->contains("fd");
}

Status check_passed_files(const nlohmann::json& job, const std::vector<UniqueFd>& files) {
  std::set<uint64_t> named;
  if (job.is_object()) {
    for (const auto& [key, value] : job.items()) {
      if (!value.is_object() || !value.contains("fd")) continue;
      const nlohmann::json& index = value["fd"];
      if (!is_index(index) || index.get<uint64_t>() >= files.size()) {
        return Status::invalid_argument(fmt::format(
            "field '{}' names descriptor {} but {} descriptor{} passed with the request", key,
            index.dump(), files.size(), files.size() == 1 ? " was" : "s were"));
      }
      if (!named.insert(index.get<uint64_t>()).second) {
        return Status::invalid_argument(fmt::format(
            "field '{}' names descriptor {}, which another field names too", key, index.dump()));
      }
    }
  }
  if (named.size() != files.size()) {
    return Status::invalid_argument(fmt::format(
        "{} descriptors were passed but the job names {} of them; every descriptor must be named "
        "by one field",
        files.size(), named.size()));
  }
  for (const auto& [key, value] : job.items()) {
    if (value.is_object() && value.contains("fd")) {
      STRIPESOLVE_RETURN_IF_ERROR(check_regular(files[value["fd"].get<size_t>()].get(), key));
    }
  }
  return Status::ok();
}

Result<int> job_input_file(const JobContext& ctx, std::string_view field) {
  STRIPESOLVE_ASSIGN_OR_RETURN(int fd, passed_file(ctx, field));
  const int mode = ::fcntl(fd, F_GETFL) & O_ACCMODE;
  if (mode != O_RDONLY && mode != O_RDWR) {
    return Status::invalid_argument(
        fmt::format("field '{}': the file was not opened for reading", field));
  }
  return fd;
}

Result<int> job_output_file(const JobContext& ctx, std::string_view field) {
  STRIPESOLVE_ASSIGN_OR_RETURN(int fd, passed_file(ctx, field));
  const int flags = ::fcntl(fd, F_GETFL);
  if ((flags & O_ACCMODE) != O_WRONLY && (flags & O_ACCMODE) != O_RDWR) {
    return Status::invalid_argument(
        fmt::format("field '{}': the file was not opened for writing", field));
  }
  if ((flags & O_APPEND) != 0) {
    return Status::invalid_argument(fmt::format(
        "field '{}': the file was opened with O_APPEND; the daemon writes at offsets", field));
  }
  return fd;
}

}  // namespace stripesolve::daemon
