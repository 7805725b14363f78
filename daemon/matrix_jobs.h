// Matrix-management job types (small lane), run against the daemon's storage::MatrixStore:
//   matrix_create {name, n, generator, seed, stripe_rows}   -> matrix info (stripe_rows 0 or
//                                                              absent: planned_stripe_rows)
//   matrix_delete {name}                                     -> {"deleted": name,
//   "factors_deleted":
//                                                              [the matrix's factors, removed too]}
//   matrix_import {name, file: {"fd": i}[, label][, stripe_rows]}  -> matrix info
//   matrix_export {name, file: {"fd": i}[, label]}                 -> {"name", "label", "bytes"}
// Listing and showing are a query (matrices_query below, the protocol's `matrices`), not jobs.
// Parameters are checked here, at the edge, with errors naming the field. Import and export go
// through the descriptor the client passed (daemon/job_files.h): the client opened the file to
// import, or created the temporary to export into, with its own rights, so the daemon never
// opens a path a client names. `label` (the client's name for the file) only appears in
// messages and in the matrix's source; it is never opened.
#pragma once

#include <sys/types.h>

#include <string>

#include <nlohmann/json.hpp>

#include "daemon/job_manager.h"
#include "scheduler/planner.h"
#include "storage/manifest.h"
#include "storage/matrix_store.h"

namespace stripesolve::daemon {

nlohmann::json matrix_info_json(const storage::MatrixInfo& info);
// Stripe height S for a new matrix of order n when the request gives none: the planner's choice
// for this daemon's engine configuration (RAM cache, cores, paths), so that the cache holds the
// working set of a solve; the store's default for n < 1. Cheap (no plan, no forecasts).
int64_t planned_stripe_rows(int64_t n, const scheduler::EngineConfig& engine,
                            const storage::MatrixStore& store);
// The `matrices` query (protocol kMatrices), not a job: {} -> {"matrices": [info...]} (an object
// whose manifest is unreadable: state "corrupt" and the problem); {"name": s} -> {"matrix":
// info}, or kNotFound naming the matrix (kCorruption for an unreadable one).
Result<nlohmann::json> matrices_query(const storage::MatrixStore& store,
                                      const nlohmann::json& request);
// The same with {"name": s, "plan": true}: a dense solve's dry run (scheduler/dense_plan.h) on
// this daemon's engine configuration and devices: {"matrix": info, "backend", "devices",
// "warnings", "plan": the plan's JSON, "plan_text": its text}. `engine` is read only.
Result<nlohmann::json> matrix_plan_query(const storage::MatrixStore& store,
                                         const nlohmann::json& request,
                                         const scheduler::EngineConfig& engine);
// `store` and `engine` must outlive the registry's jobs.
void register_matrix_jobs(JobRegistry& registry, storage::MatrixStore& store,
                          const scheduler::EngineConfig& engine);

}  // namespace stripesolve::daemon
