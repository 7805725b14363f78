// solve, submit and tridiag: the verbs that make solve jobs (client/cli.h).
#include <cstdio>
#include <memory>
#include <string>

#include "client/cli.h"
#include "client/preflight.h"
#include "client/tridiag_request.h"

namespace stripesolve::client {
namespace {

void add_solve_options(CLI::App* cmd, SolveRequest& r) {
  cmd->add_option("matrix", r.matrix, "name of a stored matrix")->required();
  cmd->add_option("--rhs", r.rhs_path,
                  "right-hand sides as an .npy (n) or (n, k): float64 or float32, C or Fortran "
                  "order, either byte order; default: generated");
  cmd->add_option("--generate", r.generate, "generated right-hand sides: ones or uniform")
      ->check(CLI::IsMember({"ones", "uniform"}));
  cmd->add_option("--nrhs", r.nrhs, "number of generated right-hand sides")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seed", r.seed, "seed of generated right-hand sides");
  cmd->add_option("--pivot", r.pivot,
                  "pivoting: row (default; GEPP of the transpose, with --refine auto a solve "
                  "whose pivots grew is re-solved with gepp), gepp (LAPACK's: factors a stored "
                  "transpose NAME.t), local, none")
      ->check(CLI::IsMember({"row", "gepp", "local", "none"}));
  cmd->add_option("--strategy", r.strategy, "elimination order: basic, zigzag, meta_zigzag")
      ->check(CLI::IsMember({"basic", "zigzag", "meta_zigzag"}));
  cmd->add_option("--refine", r.refinement,
                  "iterative refinement: auto (default: while the backward error is above its "
                  "tolerance) or a number of steps 0-100")
      ->check(CLI::IsMember({"auto"}) | CLI::Range(0, 100));
  cmd->add_flag("--in-place", r.in_place, "overwrite the matrix with its factors (half the disk)");
  cmd->add_flag_callback(
      "--no-reuse", [&r] { r.reuse = false; }, "factor again even if stored factors exist");
  cmd->add_flag_callback(
      "--no-store", [&r] { r.store = false; },
      "do not keep the factors: they live for this solve only, and take no disk space when the "
      "matrix fits the RAM cache");
}

void print_job_id(const Globals& g, uint64_t id) {
  if (g.json)
    print_json({{"job", id}});
  else
    std::printf("%llu\n", static_cast<unsigned long long>(id));
}

// `solve --dry-run`: the plan the daemon would follow (scheduler/dense_plan.h), nothing solved.
int print_plan(const Globals& g, const SolveRequest& r) {
  return simple_call(g, protocol::MessageType::kMatrices,
                     {{"name", r.matrix},
                      {"plan", true},
                      {"store", r.store},
                      {"in_place", r.in_place},
                      {"pivot", r.pivot}},
                     [](const nlohmann::json& reply) {
                       for (const auto& w : reply.value("warnings", nlohmann::json::array()))
                         std::printf("warning: %s\n", w.get<std::string>().c_str());
                       const std::string devices = reply.value("devices", std::string());
                       std::printf("backend %s%s%s\n",
                                   reply.value("backend", std::string("?")).c_str(),
                                   devices.empty() ? "" : " on ", devices.c_str());
                       std::printf("%s\n", reply.value("plan_text", std::string()).c_str());
                     });
}

void add_solve(CLI::App& app, const Globals& g, int& code) {
  auto r = std::make_shared<SolveRequest>();
  auto dry_run = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("solve", "submit a dense solve and wait for it, with progress");
  add_solve_options(cmd, *r);
  cmd->add_option("-o,--out", r->out_path, "write the solution X to this .npy as it is streamed");
  cmd->add_flag("--dry-run", *dry_run,
                "print the plan the daemon would follow (stripe sizes, cache, devices, each "
                "strategy's SSD traffic and time bound and what bounds it) and solve nothing");
  cmd->callback([r, dry_run, &g, &code] {
    if (*dry_run) return void(code = print_plan(g, *r));
    // Files first: a missing --rhs or an unwritable --out fails before anything is sent.
    auto request = build_solve_job(*r);
    if (!request.is_ok()) return void(code = fail(request.status()));
    auto c = connect_to_daemon(g);
    if (!c.is_ok()) return void(code = fail(c.status()));
    if (Status st = check_solve(**c, *r); !st.is_ok()) return void(code = fail(st));
    code = run_and_report(g, *c, *request);
  });
}

void add_submit(CLI::App& app, const Globals& g, int& code) {
  auto r = std::make_shared<SolveRequest>();
  auto* cmd = app.add_subcommand("submit", "submit a dense solve and print its job id");
  add_solve_options(cmd, *r);
  cmd->callback([r, &g, &code] {
    auto job = build_solve_job(*r);
    if (!job.is_ok()) return void(code = fail(job.status()));
    auto c = connect_to_daemon(g);
    if (!c.is_ok()) return void(code = fail(c.status()));
    if (Status st = check_solve(**c, *r); !st.is_ok()) return void(code = fail(st));
    auto id = submit_request(**c, *job);
    if (!id.is_ok()) return void(code = fail(id.status()));
    print_job_id(g, *id);
  });
}

struct TridiagOptions {
  TridiagRequest request;
  bool detach = false;
};

void add_tridiag(CLI::App& app, const Globals& g, int& code) {
  auto o = std::make_shared<TridiagOptions>();
  TridiagRequest& r = o->request;
  auto* cmd = app.add_subcommand(
      "tridiag",
      "solve a batch of tridiagonal systems given as .npy arrays and wait for it, with progress");
  cmd->add_option("--dl", r.dl_path,
                  "sub-diagonals, float64 or float32 .npy, either byte order (dl[0] of each "
                  "system is ignored)")
      ->required();
  cmd->add_option("--d", r.d_path, "diagonals, same shape and dtype")->required();
  cmd->add_option("--du", r.du_path, "super-diagonals (du[n-1] of each system is ignored)")
      ->required();
  cmd->add_option("--rhs", r.rhs_path, "right-hand sides: (n) one system, (m, n) m systems of n")
      ->required();
  cmd->add_option("--sizes", r.sizes,
                  "ragged batch: system sizes as an int64 .npy or a list such as 3,5,2 (the arrays "
                  "are then 1-D)");
  cmd->add_option("--layout", r.layout,
                  "strided: (m, n) is m systems of n (default); interleaved: (n, m), element i of "
                  "every system together")
      ->check(CLI::IsMember({"strided", "interleaved"}));
  cmd->add_option("--algorithm", r.algorithm,
                  "auto (default), thomas, cr, pcr, cr_pcr, pcr_thomas, cr_pcr_thomas, bondeli, "
                  "spike or gepp")
      ->check(CLI::IsMember({"auto", "thomas", "cr", "pcr", "cr_pcr", "pcr_thomas", "cr_pcr_thomas",
                             "bondeli", "spike", "gepp"}));
  cmd->add_flag("--unstable-ok", r.unstable_ok,
                "let auto pick unpivoted algorithms (diagonally dominant matrices; a system that "
                "breaks down or "
                "misses the backward-error tolerance falls back to gepp)");
  cmd->add_flag("--fallback", r.fallback,
                "with an unpivoted --algorithm: solve the systems where it breaks down or misses "
                "the tolerance "
                "again with gepp (without it they fail, or complete with a warning)");
  cmd->add_option("--device", r.device,
                  "auto (the CPU or GPU, whichever the daemon measured quicker for a batch this "
                  "size), cpu or gpu")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  cmd->add_option(
      "-o,--out", r.out_path,
      "write the solution (float64, the shape of --rhs) to this .npy as it is streamed");
  cmd->add_flag("--detach", o->detach,
                "print the job id and return; fetch the solution with 'stripesolve result'");
  cmd->callback([o, &g, &code] {
    const TridiagRequest& request_options = o->request;
    if (o->detach && !request_options.out_path.empty()) {
      std::fprintf(stderr,
                   "stripesolve: --out cannot be combined with --detach; fetch the solution "
                   "later with 'stripesolve result JOB -o FILE'\n");
      return void(code = kExitUsage);
    }
    // Files first: a missing or misshapen array or an unwritable --out fails before anything is
    // sent.
    if (Status st = check_tridiag_files(request_options); !st.is_ok()) return void(code = fail(st));
    auto request = build_tridiag_job(request_options);
    if (!request.is_ok()) return void(code = fail(request.status()));
    auto c = connect_to_daemon(g);
    if (!c.is_ok()) return void(code = fail(c.status()));
    if (Status st = check_gpu_requested(**c, request_options.device); !st.is_ok())
      return void(code = fail(st));
    if (o->detach) {
      auto id = submit_request(**c, *request);
      if (!id.is_ok()) return void(code = fail(id.status()));
      return print_job_id(g, *id);
    }
    code = run_and_report(g, *c, *request);
  });
}

}  // namespace

void add_solve_verbs(CLI::App& app, const Globals& g, int& code) {
  add_solve(app, g, code);
  add_submit(app, g, code);
  add_tridiag(app, g, code);
}

}  // namespace stripesolve::client
