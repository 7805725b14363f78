#include "storage/store_config.h"

#include <filesystem>
#include <string>

#include "base/config.h"

namespace stripesolve::storage {
namespace {

bool same_directory_name(const std::string& a, const std::string& b) {
  const auto normal = [](const std::string& p) {
    std::string s = std::filesystem::path(p).lexically_normal().string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
  };
  return normal(a) == normal(b);
}

}  // namespace

void parse_store_config(ConfigMap& map, StoreConfig& config) {
  map.get("paths", config.paths);
  map.get("stripe_rows", config.stripe_rows, 1, int64_t{1} << 30);
  map.get("round_robin_levels", config.round_robin_levels, 0, 1 << 20);
  map.get("levels_q", config.levels_q, 1.0, 1000.0);
  map.get_bytes("levels_cache", config.levels_cache, kMiB);
  map.get_bytes("segment_bytes", config.segment_bytes);
  map.get_bytes("min_segment_bytes", config.min_segment_bytes, 4 * kKiB, kGiB);
  map.get_choice("io_engine", config.io_engine, {"auto", "io_uring", "pread"});
  map.get("queue_depth", config.queue_depth, 1, kMaxQueueDepth);
  map.get_bytes("request_bytes", config.request_bytes, kMinRequestBytes, kMaxRequestBytes);
  map.get_bytes("write_request_bytes", config.write_request_bytes, kMinRequestBytes,
                kMaxRequestBytes);
  map.get("direct_io", config.direct_io);
  map.get("verify_checksums", config.verify_checksums);
  map.get_bytes("import_buffer", config.import_buffer, kMiB);
  map.get_bytes("free_space_reserve", config.free_space_reserve);
  map.get("group", config.group);
  const auto check_4k = [&map](const char* key, uint64_t value) {
    if (value % (4 * kKiB) != 0) throw ConfigError(map.where(key) + ": must be a multiple of 4KiB");
  };
  check_4k("segment_bytes", config.segment_bytes);
  check_4k("min_segment_bytes", config.min_segment_bytes);
  check_4k("request_bytes", config.request_bytes);
  check_4k("write_request_bytes", config.write_request_bytes);
  if (map.has("paths") && config.paths.empty()) {
    throw ConfigError(map.where("paths") + ": needs at least one directory");
  }
  // A directory listed twice would get two path indices in one marker, and every create would
  // then fail (issue 15). Spelling differences ("/a/b/", "/a/./b") are caught here; links to one
  // directory when the store is opened (MatrixStore::open).
  for (size_t i = 0; i < config.paths.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (same_directory_name(config.paths[i], config.paths[j])) {
        throw ConfigError(map.where("paths") + ": entries " + std::to_string(j) + " and " +
                          std::to_string(i) + " ('" + config.paths[j] + "' and '" +
                          config.paths[i] + "') name the same directory; list each directory once");
      }
    }
  }
  map.finish();
}

}  // namespace stripesolve::storage
