// State shared by a MatrixStore and the StripedMatrix objects it opened (internal to storage/).
//
// On-disk names (docs/storage-format.md): <path>/objects/<name>/data on every path of an
// object's placement; manifest.json and blob.<key> beside the data file on path 0.
//
// Thread-safety: config, paths, store_id and engine are immutable after open; `open_count` and
// `locked_names` are guarded by `mu`.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "storage/io_engine.h"
#include "storage/manifest.h"
#include "storage/store_config.h"

namespace stripesolve::storage {

struct StoreShared {
  StoreConfig config;
  // Store files are 0600 and folders 0700; with config.group, 0640 and 2750 (setgid: what is
  // created inside inherits the group), so that the store is never readable by all.
  mode_t file_mode() const { return config.group.empty() ? 0600 : 0640; }
  mode_t dir_mode() const { return config.group.empty() ? 0700 : 02750; }
  std::string store_id;
  std::shared_ptr<IoEngine> engine;
  int lock_fd = -1;

  Mutex mu;
  std::map<std::string, int> open_count;  // GUARDED_BY(mu): open StripedMatrix objects per name
  std::set<std::string> locked_names;     // GUARDED_BY(mu): names held by an ObjectNameLock
  CondVar name_unlocked;                  // a name left locked_names

  ~StoreShared();

  std::string object_dir(int path, const std::string& name) const {
    return config.paths[path] + "/objects/" + name;
  }
  std::string data_path(int path, const std::string& name) const {
    return object_dir(path, name) + "/data";
  }
  std::string manifest_path(const std::string& name) const {
    return object_dir(0, name) + "/manifest.json";
  }
  // The factorization's progress log (progress_log.h) of an incomplete factor.
  std::string progress_path(const std::string& name) const {
    return object_dir(0, name) + "/progress";
  }
  std::string blob_path(const std::string& name, const std::string& key) const {
    return object_dir(0, name) + "/blob." + key;
  }

  Status write_manifest(const Manifest& manifest) const;
  Result<Manifest> read_manifest(const std::string& name) const;
  // Removes the object's directories on every configured path, path 0 (the manifest) first.
  Status remove_object_files(const std::string& name) const;
};

// Object names and blob keys: 1-128 characters of [A-Za-z0-9_.-], not starting with '.' or '-'.
Status check_object_name(const std::string& name, const char* what);
// check_object_name() and at most kMaxMatrixNameLength characters (manifest.h).
Status check_matrix_name(const std::string& name);

}  // namespace stripesolve::storage
