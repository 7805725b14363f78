// Matrix-management job types (small lane), run against the daemon's storage::MatrixStore:
//   matrix_create {name, n, generator, seed, stripe_rows}   -> matrix info
//   matrix_list   {}                                         -> {"matrices": [info...]}
//   matrix_show   {name}                                     -> matrix info
//   matrix_delete {name}                                     -> {"deleted": name}
//   matrix_import {name, path} / matrix_export {name, path}  when the store offers .npy import/export
// Parameters are checked here, at the edge, with errors naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include "daemon/job_manager.h"
#include "storage/manifest.h"
#include "storage/matrix_store.h"

namespace stripesolve::daemon {

nlohmann::json matrix_info_json(const storage::MatrixInfo& info);
// `store` must outlive the registry's jobs.
void register_matrix_jobs(JobRegistry& registry, storage::MatrixStore& store);

}  // namespace stripesolve::daemon
