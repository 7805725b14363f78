#include "daemon/tridiag_sources.h"

#include <fmt/format.h>

#include "daemon/job_files.h"
#include "daemon/npy_file.h"
#include "daemon/tridiag_input.h"
#include "protocol/messages.h"

namespace stripesolve::daemon {
namespace {

Result<int64_t> upload_id(const nlohmann::json& job, std::string_view field) {
  auto it = job.find(field);
  if (it == job.end()) {
    return Status::invalid_argument(fmt::format(
        "missing field '{}' (an .npy file: {{\"fd\": i}}, or an upload: {{\"upload\": id}})",
        field));
  }
  if (!it->is_object() || !it->contains("upload")) {
    return Status::invalid_argument(fmt::format(
        "field '{}' must be {{\"fd\": i}} or {{\"upload\": id}}, got {}", field, it->dump()));
  }
  auto id = protocol::get_int(*it, "upload", 1, INT64_MAX);
  if (!id.is_ok()) return id.status().with_context(field);
  return *id;
}

Result<std::string> take_upload(UploadStore& uploads, uid_t owner, const nlohmann::json& job,
                                std::string_view field) {
  STRIPESOLVE_ASSIGN_OR_RETURN(int64_t id, upload_id(job, field));
  auto bytes = uploads.take(owner, static_cast<uint64_t>(id));
  if (!bytes.is_ok()) return bytes.status().with_context(field);
  return std::move(bytes).value();
}

// The sizes of a ragged batch: inline, an upload or a passed file. A file's entries are
// bounded before they are read: no more than rhs has elements (every system has an unknown),
// and rhs within tridiag.max_bytes.
Result<std::vector<int64_t>> read_sizes(const JobContext& ctx, const std::string& upload,
                                        const protocol::NpyHeader& rhs, uint64_t max_bytes) {
  const nlohmann::json& field = ctx.params()["sizes"];
  if (!field.is_object()) return parse_inline_sizes(field);
  auto header = Result<protocol::NpyHeader>(Status::internal("no sizes header"));
  int fd = -1;
  if (names_file(ctx.params(), "sizes")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(fd, job_input_file(ctx, "sizes"));
    header = read_npy_header(fd);
  } else {
    header = protocol::inspect_npy(upload);
  }
  if (!header.is_ok()) return header.status().with_context("sizes");
  if (header->shape.size() != 1) {
    return Status::invalid_argument(
        fmt::format("sizes has shape {}; it must be 1-D", protocol::format_shape(header->shape)));
  }
  if (fd < 0) {
    auto values = protocol::npy_int_values(upload, *header);
    if (!values.is_ok()) return values.status().with_context("sizes");
    return std::move(values).value();
  }
  STRIPESOLVE_RETURN_IF_ERROR(check_batch_bytes(static_cast<uint64_t>(rhs.elements()), max_bytes));
  if (header->elements() > rhs.elements()) {
    return Status::invalid_argument(fmt::format(
        "sizes has {} entries but rhs has {} elements (every system needs at least one unknown)",
        header->elements(), rhs.elements()));
  }
  auto values = read_npy_ints(fd, *header);
  if (!values.is_ok()) return values.status().with_context("sizes");
  return std::move(values).value();
}

}  // namespace

Result<TridiagInputs> take_tridiag_inputs(const JobContext& ctx, UploadStore& uploads,
                                          uint64_t max_bytes) {
  const nlohmann::json& job = ctx.params();
  const uid_t owner = ctx.owner();
  TridiagInputs in;
  Status first_error;
  auto keep_first = [&](const Status& st) {
    if (first_error.is_ok()) first_error = st;
  };
  for (std::size_t k = 0; k < kTridiagArrays.size(); ++k) {
    if (names_file(job, kTridiagArrays[k])) continue;
    auto bytes = take_upload(uploads, owner, job, kTridiagArrays[k]);
    if (bytes.is_ok()) {
      in.arrays[k].bytes = std::move(bytes).value();
    } else {
      keep_first(bytes.status());
    }
  }
  std::string sizes_upload;
  if (job.contains("sizes") && job["sizes"].is_object() && !names_file(job, "sizes")) {
    auto bytes = take_upload(uploads, owner, job, "sizes");
    if (bytes.is_ok()) {
      sizes_upload = std::move(bytes).value();
    } else {
      keep_first(bytes.status());
    }
  }
  STRIPESOLVE_RETURN_IF_ERROR(first_error);
  for (std::size_t k = 0; k < kTridiagArrays.size(); ++k) {
    TridiagSource& a = in.arrays[k];
    Result<protocol::NpyHeader> header = Status::internal("no header");
    if (names_file(job, kTridiagArrays[k])) {
      auto fd = job_input_file(ctx, kTridiagArrays[k]);
      if (!fd.is_ok()) return fd.status();
      a.fd = *fd;
      header = read_npy_header(a.fd);
    } else {
      header = protocol::inspect_npy(a.bytes);
    }
    if (!header.is_ok()) return header.status().with_context(kTridiagArrays[k]);
    a.header = *header;
  }
  if (job.contains("sizes")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(in.sizes,
                                 read_sizes(ctx, sizes_upload, in.arrays[3].header, max_bytes));
  }
  return in;
}

}  // namespace stripesolve::daemon
