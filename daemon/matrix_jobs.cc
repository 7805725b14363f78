#include "daemon/matrix_jobs.h"

#include <sys/stat.h>

#include <functional>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/backend.h"
#include "base/logging.h"
#include "base/units.h"
#include "base/utc_time.h"
#include "daemon/job_files.h"
#include "protocol/messages.h"
#include "scheduler/dense_plan.h"
#include "scheduler/dense_solve.h"

namespace stripesolve::daemon {

using protocol::get_bool;
using protocol::get_int;
using protocol::get_string;

namespace {

// The client's name for a passed file, for messages only (never opened).
Result<std::string> file_label(const nlohmann::json& p) {
  if (!p.contains("label")) return std::string("(passed file)");
  return get_string(p, "label");
}

// create's generator from its params (the runner's and the restart check's).
Result<storage::GeneratorSpec> generator_spec(const nlohmann::json& p) {
  storage::GeneratorSpec spec;
  spec.name = p.value("generator", std::string("uniform"));
  if (p.contains("seed")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(int64_t seed, get_int(p, "seed", 0, INT64_MAX));
    spec.seed = static_cast<uint64_t>(seed);
  }
  return spec;
}

// The restart check of import and create (FinishedBeforeRestart): the store holds the job's
// matrix complete, made from the job's source (`source_of` its params), created no earlier
// than the job started (the store refuses a second object of one name, so such a matrix is
// the job's own).
FinishedBeforeRestart stored_complete(
    const storage::MatrixStore& store,
    std::function<Result<std::string>(const nlohmann::json&)> source_of) {
  return [&store, source_of = std::move(source_of)](
             const nlohmann::json& p, Clock::time_point started) -> std::optional<nlohmann::json> {
    auto name = get_string(p, "name");
    auto source = source_of(p);
    if (!name.is_ok() || !source.is_ok()) return std::nullopt;
    auto info = store.info(*name);
    if (!info.is_ok() || info->state != storage::ObjectState::kComplete ||
        info->source != *source || info->created < utc_time(started)) {
      return std::nullopt;
    }
    return matrix_info_json(*info);
  };
}

}  // namespace

nlohmann::json matrix_info_json(const storage::MatrixInfo& info) {
  if (info.state == storage::ObjectState::kCorrupt) {
    return {
        {"name", info.name}, {"kind", info.kind}, {"state", "corrupt"}, {"problem", info.problem}};
  }
  nlohmann::json j = {{"name", info.name},
                      {"id", info.id},
                      {"n", info.geometry.n},
                      {"stripe_rows", info.geometry.stripe_rows},
                      {"stripes", info.geometry.stripes},
                      {"kind", info.kind},
                      {"state", std::string(storage::object_state_name(info.state))},
                      {"dtype", info.dtype},
                      {"stored_bytes", info.stored_bytes},
                      {"stored", format_bytes(info.stored_bytes)},
                      {"paths", info.path_count},
                      {"created", info.created},
                      {"source", info.source}};
  if (info.factor_of) {
    j["factor_of"] = {{"id", info.factor_of->matrix_id}, {"n", info.factor_of->n}};
  }
  return j;
}

Result<nlohmann::json> matrices_query(const storage::MatrixStore& store,
                                      const nlohmann::json& request) {
  if (request.contains("name")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(std::string name, get_string(request, "name"));
    STRIPESOLVE_ASSIGN_OR_RETURN(storage::MatrixInfo info, store.info(name));
    return nlohmann::json{{"matrix", matrix_info_json(info)}};
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(std::vector<storage::MatrixInfo> all, store.list());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& info : all) list.push_back(matrix_info_json(info));
  return nlohmann::json{{"matrices", std::move(list)}};
}

Result<nlohmann::json> matrix_plan_query(const storage::MatrixStore& store,
                                         const nlohmann::json& request,
                                         const scheduler::EngineConfig& engine) {
  STRIPESOLVE_ASSIGN_OR_RETURN(bool plan, get_bool(request, "plan", false));
  if (!plan) return matrices_query(store, request);
  if (!request.contains("name")) {
    return Status::invalid_argument("a plan is asked for one matrix: the request names none");
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(std::string name, get_string(request, "name"));
  // The solve's own keys (a dense_solve job's "store", "in_place", "pivot"): whether it would
  // keep its factors.
  scheduler::DenseSolveOptions options;
  STRIPESOLVE_ASSIGN_OR_RETURN(options.store_factors, get_bool(request, "store", true));
  STRIPESOLVE_ASSIGN_OR_RETURN(options.in_place, get_bool(request, "in_place", false));
  if (request.contains("pivot")) {
    STRIPESOLVE_ASSIGN_OR_RETURN(std::string pivot, get_string(request, "pivot"));
    STRIPESOLVE_ASSIGN_OR_RETURN(options.pivot, backend::parse_pivot_mode(pivot));
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(storage::MatrixInfo info, store.info(name));
  STRIPESOLVE_ASSIGN_OR_RETURN(
      scheduler::DryRun run,
      scheduler::plan_solve(store, name, engine, scheduler::keeps_factors(options)));
  return nlohmann::json{{"matrix", matrix_info_json(info)},
                        {"backend", run.backend},
                        {"devices", run.devices},
                        {"warnings", run.warnings},
                        {"plan", nlohmann::json::parse(scheduler::plan_to_json(run.plan))},
                        {"plan_text", scheduler::plan_to_text(run.plan)}};
}

int64_t planned_stripe_rows(int64_t n, const scheduler::EngineConfig& engine,
                            const storage::MatrixStore& store) {
  // Only S, not a whole plan: its forecasts take time and memory in proportion to N^2, and the
  // request has not been checked against the free space yet (issue 15).
  if (n < 1) return store.config().stripe_rows;
  const auto paths = static_cast<int64_t>(store.config().paths.size());
  return scheduler::new_matrix_stripe_rows(n, engine, scheduler::describe_machine(engine, paths));
}

void register_matrix_jobs(JobRegistry& registry, storage::MatrixStore& store,
                          const scheduler::EngineConfig& engine) {
  registry.add(
      "matrix_import", Lane::kSmall,
      [&store, &engine](JobContext& ctx) -> Result<nlohmann::json> {
        const auto& p = ctx.params();
        STRIPESOLVE_ASSIGN_OR_RETURN(std::string name, get_string(p, "name"));
        STRIPESOLVE_ASSIGN_OR_RETURN(std::string label, file_label(p));
        STRIPESOLVE_ASSIGN_OR_RETURN(int fd, job_input_file(ctx, "file"));
        storage::ImportOptions options;
        if (p.contains("stripe_rows")) {
          STRIPESOLVE_ASSIGN_OR_RETURN(options.stripe_rows,
                                       get_int(p, "stripe_rows", 0, int64_t{1} << 40));
        }
        options.stripe_rows_for = [&](int64_t n) { return planned_stripe_rows(n, engine, store); };
        ctx.log(fmt::format("importing '{}' from the client's file {}", name, label));
        STRIPESOLVE_ASSIGN_OR_RETURN(storage::MatrixInfo info,
                                     store.import_npy(name, fd, label, options));
        return matrix_info_json(info);
      },
      stored_complete(store, [](const nlohmann::json& p) -> Result<std::string> {
        STRIPESOLVE_ASSIGN_OR_RETURN(std::string label, file_label(p));
        return storage::MatrixStore::npy_source(label);
      }));
  registry.add("matrix_export", Lane::kSmall, [&store](JobContext& ctx) -> Result<nlohmann::json> {
    const auto& p = ctx.params();
    STRIPESOLVE_ASSIGN_OR_RETURN(std::string name, get_string(p, "name"));
    STRIPESOLVE_ASSIGN_OR_RETURN(std::string label, file_label(p));
    STRIPESOLVE_ASSIGN_OR_RETURN(int fd, job_output_file(ctx, "file"));
    ctx.log(fmt::format("exporting '{}' into the client's file {}", name, label));
    STRIPESOLVE_RETURN_IF_ERROR(store.export_npy(name, fd, label));
    struct stat st {};
    const int64_t bytes = ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
    return nlohmann::json{{"name", name}, {"label", label}, {"bytes", bytes}};
  });
  registry.add(
      "matrix_create", Lane::kSmall,
      [&store, &engine](JobContext& ctx) -> Result<nlohmann::json> {
        const auto& p = ctx.params();
        STRIPESOLVE_ASSIGN_OR_RETURN(std::string name, get_string(p, "name"));
        STRIPESOLVE_ASSIGN_OR_RETURN(int64_t n, get_int(p, "n", 1, int64_t{1} << 40));
        STRIPESOLVE_ASSIGN_OR_RETURN(storage::GeneratorSpec spec, generator_spec(p));
        int64_t stripe_rows = 0;
        if (p.contains("stripe_rows")) {
          STRIPESOLVE_ASSIGN_OR_RETURN(stripe_rows, get_int(p, "stripe_rows", 0, n));
        }
        STRIPESOLVE_RETURN_IF_ERROR(storage::check_generator(spec));
        if (stripe_rows == 0) stripe_rows = planned_stripe_rows(n, engine, store);
        ctx.log(fmt::format("creating matrix '{}' of order {} ({}, seed {}), {}", name, n,
                            spec.name, spec.seed,
                            format_bytes(static_cast<uint64_t>(n) * static_cast<uint64_t>(n) * 8)));
        ctx.job().set_progress({{"phase", "generate"}, {"fraction", 0.0}});
        STRIPESOLVE_ASSIGN_OR_RETURN(storage::MatrixInfo info,
                                     store.create_generated(name, n, spec, stripe_rows));
        ctx.job().set_progress({{"phase", "generate"}, {"fraction", 1.0}});
        return matrix_info_json(info);
      },
      stored_complete(store, [](const nlohmann::json& p) -> Result<std::string> {
        STRIPESOLVE_ASSIGN_OR_RETURN(storage::GeneratorSpec spec, generator_spec(p));
        return storage::MatrixStore::generated_source(spec);
      }));
  registry.add("matrix_delete", Lane::kSmall, [&store](JobContext& ctx) -> Result<nlohmann::json> {
    STRIPESOLVE_ASSIGN_OR_RETURN(std::string name, get_string(ctx.params(), "name"));
    // Its factors go too: each is as large as the matrix and useless without it (issue 15).
    STRIPESOLVE_ASSIGN_OR_RETURN(std::vector<std::string> factors, store.remove_with_factors(name));
    ctx.log(factors.empty()
                ? fmt::format("deleted '{}'", name)
                : fmt::format("deleted '{}' and its factors {}", name, fmt::join(factors, ", ")));
    return nlohmann::json{{"deleted", name}, {"factors_deleted", factors}};
  });
}

}  // namespace stripesolve::daemon
