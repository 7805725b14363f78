// stripesolve: the command-line client of stripesolved (docs/protocol.md).
//
// Exit codes (also in `stripesolve --help`):
//   0 success; 1 the daemon reported an error or the job FAILED; 2 usage error;
//   3 the daemon is not reachable; 4 the job was CANCELLED; 5 the connection was lost mid-reply;
//   6 the job COMPLETED_WITH_WARNING; 130 Ctrl-C while waiting (the job keeps running).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/build_info.h"
#include "base/units.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/human_output.h"
#include "client/interrupt.h"
#include "client/preflight.h"
#include "client/progress.h"
#include "client/tridiag_request.h"
#include "protocol/npy.h"
#include "protocol/socket_path.h"

namespace {

using namespace stripesolve;
using namespace stripesolve::client;
using protocol::MessageType;

constexpr int kExitOk = 0, kExitError = 1, kExitUsage = 2, kExitUnreachable = 3, kExitCancelled = 4,
              kExitLost = 5, kExitWarning = 6, kExitInterrupted = 130;

struct Globals {
  std::string socket;
  int64_t daemon_uid = -1;  // --daemon-uid; -1: $STRIPESOLVE_DAEMON_UID or none
  bool json = false;
  bool quiet = false;
  // How long `solve` and `watch` wait for a daemon that went away (a restart) before giving up.
  double reconnect_seconds = 600;
};

bool connected_once = false;

int fail(const Status& st) {
  std::fprintf(stderr, "stripesolve: %s\n", st.message().c_str());
  if (st.code() == StatusCode::kUnavailable) return connected_once ? kExitLost : kExitUnreachable;
  if (st.code() == StatusCode::kCancelled) return kExitCancelled;
  return kExitError;
}

Result<std::unique_ptr<Connection>> open(const Globals& g) {
  std::optional<uid_t> daemon_uid;
  if (g.daemon_uid >= 0) daemon_uid = static_cast<uid_t>(g.daemon_uid);
  auto c = Connection::connect(protocol::resolve_socket_path(g.socket), "stripesolve", daemon_uid);
  if (c.is_ok()) connected_once = true;
  return c;
}

ReconnectPolicy reconnect_policy(const Globals& g) {
  ReconnectPolicy p;
  p.seconds = g.reconnect_seconds;
  p.connect = [&g] { return open(g); };
  return p;
}

void print_json(const nlohmann::json& j) { std::printf("%s\n", j.dump(2).c_str()); }

std::string absolute(const std::string& path) { return std::filesystem::absolute(path).string(); }

void print_job(const nlohmann::json& j) { std::printf("%s", job_details(j).c_str()); }

// `jobs --state`: a comma-separated list of job states, any case.
CLI::Validator job_state_list_validator() {
  return CLI::Validator(
      [](std::string& list) -> std::string {
        static const std::vector<std::string> states = {"pending", "running", "completed",
                                                        "completed_with_warning", "failed", "cancelled"};
        size_t begin = 0;
        while (begin <= list.size()) {
          size_t end = list.find(',', begin);
          if (end == std::string::npos) end = list.size();
          std::string one = list.substr(begin, end - begin);
          for (char& c : one) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          if (std::find(states.begin(), states.end(), one) == states.end()) {
            return fmt::format("unknown job state '{}' (one of: {})", one, fmt::join(states, ", "));
          }
          begin = end + 1;
        }
        return std::string();
      },
      "STATE[,STATE...]");
}

// Exit code for a finished job, printing what a user wants to see.
int report_job(const Globals& g, const nlohmann::json& job) {
  const std::string state = job.value("state", std::string());
  if (g.json) {
    print_json(job);
  } else if ((state == "COMPLETED" || state == "COMPLETED_WITH_WARNING") &&
             job.value("type", std::string()) == "dense_solve") {
    const auto& r = job.value("result", nlohmann::json::object());
    const std::string where = r.value("device", r.value("backend", std::string()));
    std::printf("job %s %s: n = %s, residual = %.3e, %s, %.2f s%s%s\n",
                job.value("id", nlohmann::json(0)).dump().c_str(), state.c_str(),
                r.value("shape", nlohmann::json::array({0})).at(0).dump().c_str(), r.value("residual", 0.0),
                client::format_flop_rate(r.value("gflops", 0.0)).c_str(), r.value("seconds", 0.0),
                where.empty() ? "" : (" on " + where).c_str(),
                r.value("reused_factors", false) ? " (reused factors)" : "");
    // -1: not computed / estimated / tracked (docs/protocol.md says when).
    auto figure = [](double v) { return v < 0 ? std::string("n/a") : fmt::format("{:.3e}", v); };
    std::printf("backward error %s (tolerance %s, %s refinement step(s)), rcond estimate %s, "
                "pivot growth %s\n",
                figure(r.value("backward_error", -1.0)).c_str(), figure(r.value("tolerance", -1.0)).c_str(),
                r.value("refinement_steps", nlohmann::json(0)).dump().c_str(),
                figure(r.value("rcond", -1.0)).c_str(), figure(r.value("growth", -1.0)).c_str());
    if (job.contains("warning")) {
      std::fprintf(stderr, "stripesolve: warning: job %s: %s\n", job.value("id", nlohmann::json(0)).dump().c_str(),
                   job.value("warning", std::string()).c_str());
    }
  } else if ((state == "COMPLETED" || state == "COMPLETED_WITH_WARNING") &&
             job.value("type", std::string()) == "tridiag_solve") {
    const auto& r = job.value("result", nlohmann::json::object());
    std::printf("job %s %s: %s systems, %s unknowns (%s), %s on the %s in %.3f s, max relative residual %.3e\n",
                job.value("id", nlohmann::json(0)).dump().c_str(), state.c_str(),
                r.value("systems", nlohmann::json(0)).dump().c_str(),
                r.value("unknowns", nlohmann::json(0)).dump().c_str(), r.value("layout", std::string()).c_str(),
                r.value("algorithm", std::string()).c_str(), r.value("device", std::string()).c_str(),
                r.value("seconds", 0.0), r.value("max_relative_residual", 0.0));
    std::printf("backward error %.3e (tolerance %.3e, system %s), %s systems fell back to gepp%s\n",
                r.value("backward_error", 0.0), r.value("tolerance", 0.0),
                r.value("worst_backward_system", nlohmann::json(0)).dump().c_str(),
                r.value("fell_back", nlohmann::json(0)).dump().c_str(),
                r.value("fell_back", 0) > 0
                    ? (" (first: " + r.value("fell_back_systems", nlohmann::json::array()).dump() + ")").c_str()
                    : "");
    if (!g.quiet) {
      for (const auto& note : r.value("notes", nlohmann::json::array())) {
        std::printf("note: %s\n", note.get<std::string>().c_str());
      }
    }
  } else if (!g.quiet) {
    print_job(job);
  }
  if (state == "COMPLETED") return kExitOk;
  if (state == "COMPLETED_WITH_WARNING") {
    if (!g.json && job.value("type", std::string()) != "dense_solve") {
      std::fprintf(stderr, "stripesolve: warning: job %s: %s\n", job.value("id", nlohmann::json(0)).dump().c_str(),
                   job.value("warning", std::string()).c_str());
    }
    return kExitWarning;
  }
  if (state == "CANCELLED") return kExitCancelled;
  if (!g.json && job.contains("error")) {
    std::fprintf(stderr, "stripesolve: job %s %s: %s\n", job.value("id", nlohmann::json(0)).dump().c_str(),
                 state.c_str(), job["error"].value("message", std::string()).c_str());
  }
  return kExitError;
}

// The exit code a job's state gives `status` (the footer's table): the job's own outcome.
int exit_code_of_state(const std::string& state) {
  if (state == "FAILED") return kExitError;
  if (state == "CANCELLED") return kExitCancelled;
  if (state == "COMPLETED_WITH_WARNING") return kExitWarning;
  return kExitOk;
}

// `logs -f`: asks for the lines after the last it printed every half second until the job has
// ended (the daemon reads the state before the lines, so none is missed).
int follow_logs(const Globals& g, uint64_t job_id) {
  auto c = open(g);
  if (!c.is_ok()) return fail(c.status());
  uint64_t from = 0;
  for (;;) {
    auto r = (*c)->call(MessageType::kLogs, {{"job", job_id}, {"from", from}});
    if (!r.is_ok()) return fail(r.status());
    const uint64_t first = r->value("first", from);
    if (first > from && from > 0) {
      std::fprintf(stderr, "stripesolve: %llu older line(s) were dropped by the daemon\n",
                   static_cast<unsigned long long>(first - from));
    }
    for (const auto& l : r->value("lines", nlohmann::json::array())) {
      std::printf("%s\n", g.json ? l.dump().c_str() : l.get<std::string>().c_str());
    }
    std::fflush(stdout);
    from = r->value("next", from);
    const std::string state = r->value("state", std::string());
    if (state != "PENDING" && state != "RUNNING") return exit_code_of_state(state);
    ::usleep(500 * 1000);
  }
}

// state (optional): the reply's "state" field, for callers that exit by it.
// `adjust` (optional) edits the reply before either output sees it (e.g. the `jobs` filters).
int simple_call(const Globals& g, MessageType type, nlohmann::json header,
                const std::function<void(const nlohmann::json&)>& human, std::string* state = nullptr,
                const std::function<void(nlohmann::json&)>& adjust = {}) {
  auto c = open(g);
  if (!c.is_ok()) return fail(c.status());
  auto r = (*c)->call(type, std::move(header));
  if (!r.is_ok()) return fail(r.status());
  if (adjust) adjust(*r);
  if (state != nullptr) *state = r->value("state", std::string());
  if (g.json) {
    print_json(*r);
  } else {
    human(*r);
  }
  return kExitOk;
}

int run_matrix_job(const Globals& g, JobRequest request) {
  auto c = open(g);
  if (!c.is_ok()) return fail(c.status());
  auto r = wait_request(**c, request);
  if (!r.is_ok()) return fail(r.status());
  if (Status st = finish_output(request, *r); !st.is_ok()) return fail(st);
  const std::string state = r->value("state", std::string());
  if (state != "COMPLETED") return report_job(g, *r);
  const auto& result = r->value("result", nlohmann::json::object());
  if (g.json) {
    print_json(result);
  } else if (result.contains("deleted")) {
    std::printf("deleted %s\n", result.value("deleted", std::string()).c_str());
    for (const auto& f : result.value("factors_deleted", nlohmann::json::array())) {
      std::printf("deleted its factor %s\n", f.is_string() ? f.get<std::string>().c_str() : f.dump().c_str());
    }
  } else if (result.contains("n") && result.contains("kind")) {  // matrix info: create, import
    std::printf("%s", matrix_details(result).c_str());
  } else if (result.contains("bytes")) {  // export
    std::printf("exported '%s' to %s (%s)\n", result.value("name", std::string()).c_str(),
                result.value("label", std::string()).c_str(),
                format_bytes(result.value("bytes", uint64_t{0})).c_str());
  } else {
    print_json(result);
  }
  return kExitOk;
}

// The first Ctrl-C while a job runs: the job goes on, the client stops waiting (its partial
// output removed), and a second press within 2 s cancels the job.
int interrupted(const Globals& g, uint64_t id, JobRequest& request, int presses) {
  (void)finish_output(request, {{"state", "INTERRUPTED"}});  // removes the partial file
  std::fprintf(stderr,
               "\nstripesolve: job %llu keeps running; Ctrl-C again within 2 s cancels it; fetch it "
               "later with 'stripesolve result %llu'\n",
               static_cast<unsigned long long>(id), static_cast<unsigned long long>(id));
  if (!InterruptWatch::another_press_within(presses, std::chrono::milliseconds(2000))) {
    return kExitInterrupted;
  }
  auto c = open(g);
  if (!c.is_ok()) return fail(c.status());
  auto r = (*c)->call(MessageType::kCancel, {{"job", id}});
  if (!r.is_ok()) return fail(r.status());
  std::fprintf(stderr, "stripesolve: job %llu cancelled\n", static_cast<unsigned long long>(id));
  return kExitCancelled;
}

// Runs a job to its end with progress, puts its output in place, and reports it.
int run_and_report(const Globals& g, std::unique_ptr<Connection>& c, JobRequest& request) {
  auto id = submit_request(*c, request);
  if (!id.is_ok()) return fail(id.status());
  request.files.clear();  // the daemon holds its own descriptors now
  if (!g.json && !g.quiet) std::fprintf(stderr, "submitted job %llu\n", static_cast<unsigned long long>(*id));
  ProgressDisplay display(!g.quiet && !g.json);
  InterruptWatch ctrl_c;
  const auto on_interrupt = [] {
    return InterruptWatch::presses() > 0 ? Status::cancelled("interrupted") : Status::ok();
  };
  c->set_interrupt_check(on_interrupt);
  ReconnectPolicy policy = reconnect_policy(g);
  policy.connect = [&g, on_interrupt]() -> Result<std::unique_ptr<Connection>> {
    STRIPESOLVE_ASSIGN_OR_RETURN(auto fresh, open(g));
    fresh->set_interrupt_check(on_interrupt);
    return fresh;
  };
  auto done = follow_job_reconnecting(c, *id, &display, policy);
  if (InterruptWatch::presses() > 0) return interrupted(g, *id, request, InterruptWatch::presses());
  if (!done.is_ok()) return fail(done.status());
  if (Status st = finish_output(request, *done); !st.is_ok()) return fail(st);
  return report_job(g, *done);
}

void add_solve_options(CLI::App* cmd, SolveRequest& r) {
  cmd->add_option("matrix", r.matrix, "name of a stored matrix")->required();
  cmd->add_option("--rhs", r.rhs_path, "right-hand sides as a float64 .npy (n) or (n, k); default: generated");
  cmd->add_option("--generate", r.generate, "generated right-hand sides: ones or uniform")
      ->check(CLI::IsMember({"ones", "uniform"}));
  cmd->add_option("--nrhs", r.nrhs, "number of generated right-hand sides")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seed", r.seed, "seed of generated right-hand sides");
  cmd->add_option("--pivot", r.pivot, "pivoting: row (default, GEPP-stable), local, none")
      ->check(CLI::IsMember({"row", "local", "none"}));
  cmd->add_option("--strategy", r.strategy, "elimination order: basic, zigzag, meta_zigzag")
      ->check(CLI::IsMember({"basic", "zigzag", "meta_zigzag"}));
  cmd->add_option("--refine", r.refinement,
                  "iterative refinement: auto (default: while the backward error is above its "
                  "tolerance) or a number of steps 0-100")
      ->check(CLI::IsMember({"auto"}) | CLI::Range(0, 100));
  cmd->add_flag("--in-place", r.in_place, "overwrite the matrix with its factors (half the disk)");
  cmd->add_flag_callback("--no-reuse", [&r] { r.reuse = false; },
                         "factor again even if stored factors exist");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stripesolve: client of the stripesolved solver daemon"};
  app.option_defaults()->always_capture_default();  // --help shows every option's default
  app.footer(
      "Exit codes: 0 ok, 1 error or job FAILED, 2 usage, 3 daemon not reachable, 4 job CANCELLED, "
      "5 connection lost mid-reply, 6 job COMPLETED_WITH_WARNING (the result's warning says why), "
      "130 Ctrl-C while waiting (the job keeps running; a second Ctrl-C within 2 s cancels it).\nSocket: --socket, else $STRIPESOLVE_SOCKET, else "
      "$XDG_RUNTIME_DIR/stripesolve/stripesolved.sock, else /tmp/stripesolve-$UID/stripesolved.sock.\n"
      "The client talks only to a daemon run by root or by you, or by the uid in --daemon-uid / "
      "$STRIPESOLVE_DAEMON_UID.");
  app.set_version_flag("--version",
                       std::string("stripesolve ") + stripesolve::kVersion + " (commit " +
                           stripesolve::kGitCommit + ", " + stripesolve::kBuildType +
                           ")\nThe daemon's: stripesolve daemon status",
                       "print the version and git commit, exit");
  app.require_subcommand(1);
  app.fallthrough();  // global options also after the verb: `stripesolve jobs --json`
  Globals g;
  app.add_option("--socket", g.socket, "daemon socket path");
  app.add_option("--daemon-uid", g.daemon_uid,
                 "accept a daemon run by this uid (besides root and you; default $STRIPESOLVE_DAEMON_UID)")
      ->check(CLI::Range(int64_t{0}, int64_t{0xfffffffe}));
  app.add_flag("--json", g.json, "print replies as JSON");
  app.add_flag("-q,--quiet", g.quiet, "no progress output");
  app.add_option("--reconnect-timeout", g.reconnect_seconds,
                 "solve, watch: seconds to keep reconnecting to a daemon that went away (0: give up at once)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 7 * 86400.0));
  int code = kExitOk;

  SolveRequest solve_req;
  std::string solve_out;
  auto* solve = app.add_subcommand("solve", "submit a dense solve and wait for it, with progress");
  add_solve_options(solve, solve_req);
  solve->add_option("-o,--out", solve_out, "write the solution X to this .npy as it is streamed");
  solve->callback([&] {
    solve_req.out_path = solve_out;
    // Files first: a missing --rhs or an unwritable --out fails before anything is sent.
    auto request = build_solve_job(solve_req);
    if (!request.is_ok()) return void(code = fail(request.status()));
    auto c = open(g);
    if (!c.is_ok()) return void(code = fail(c.status()));
    if (Status st = check_solve(**c, solve_req); !st.is_ok()) return void(code = fail(st));
    code = run_and_report(g, *c, *request);
  });

  SolveRequest submit_req;
  auto* submit = app.add_subcommand("submit", "submit a dense solve and print its job id");
  add_solve_options(submit, submit_req);
  submit->callback([&] {
    auto job = build_solve_job(submit_req);
    if (!job.is_ok()) return void(code = fail(job.status()));
    auto c = open(g);
    if (!c.is_ok()) return void(code = fail(c.status()));
    if (Status st = check_solve(**c, submit_req); !st.is_ok()) return void(code = fail(st));
    auto id = submit_request(**c, *job);
    if (!id.is_ok()) return void(code = fail(id.status()));
    if (g.json) print_json({{"job", *id}});
    else std::printf("%llu\n", static_cast<unsigned long long>(*id));
  });

  TridiagRequest tri_req;
  std::string tri_out;
  bool tri_detach = false;
  auto* tri = app.add_subcommand(
      "tridiag", "solve a batch of tridiagonal systems given as .npy arrays and wait for it, with progress");
  tri->add_option("--dl", tri_req.dl_path, "sub-diagonals, float64 or float32 .npy (dl[0] of each system is ignored)")
      ->required();
  tri->add_option("--d", tri_req.d_path, "diagonals, same shape and dtype")->required();
  tri->add_option("--du", tri_req.du_path, "super-diagonals (du[n-1] of each system is ignored)")->required();
  tri->add_option("--rhs", tri_req.rhs_path, "right-hand sides: (n) one system, (m, n) m systems of n")->required();
  tri->add_option("--sizes", tri_req.sizes,
                  "ragged batch: system sizes as an int64 .npy or a list such as 3,5,2 (the arrays are then 1-D)");
  tri->add_option("--layout", tri_req.layout,
                  "strided: (m, n) is m systems of n (default); interleaved: (n, m), element i of every system together")
      ->check(CLI::IsMember({"strided", "interleaved"}));
  tri->add_option("--algorithm", tri_req.algorithm,
                  "auto (default), thomas, cr, pcr, cr_pcr, pcr_thomas, cr_pcr_thomas, bondeli, spike or gepp")
      ->check(CLI::IsMember({"auto", "thomas", "cr", "pcr", "cr_pcr", "pcr_thomas", "cr_pcr_thomas", "bondeli",
                             "spike", "gepp"}));
  tri->add_flag("--unstable-ok", tri_req.unstable_ok,
                "let auto pick unpivoted algorithms (diagonally dominant matrices; a system that breaks down or "
                "misses the backward-error tolerance falls back to gepp)");
  tri->add_flag("--fallback", tri_req.fallback,
                "with an unpivoted --algorithm: solve the systems where it breaks down or misses the tolerance "
                "again with gepp (without it they fail, or complete with a warning)");
  tri->add_option("--device", tri_req.device, "auto (the GPU when the daemon has one), cpu or gpu")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  tri->add_option("-o,--out", tri_out, "write the solution (float64, the shape of --rhs) to this .npy as it is streamed");
  tri->add_flag("--detach", tri_detach, "print the job id and return; fetch the solution with 'stripesolve result'");
  tri->callback([&] {
    if (tri_detach && !tri_out.empty()) {
      std::fprintf(stderr, "stripesolve: --out cannot be combined with --detach; fetch the solution "
                           "later with 'stripesolve result JOB -o FILE'\n");
      return void(code = kExitUsage);
    }
    tri_req.out_path = tri_out;
    // Files first: a missing or misshapen array or an unwritable --out fails before anything is sent.
    if (Status st = check_tridiag_files(tri_req); !st.is_ok()) return void(code = fail(st));
    auto request = build_tridiag_job(tri_req);
    if (!request.is_ok()) return void(code = fail(request.status()));
    auto c = open(g);
    if (!c.is_ok()) return void(code = fail(c.status()));
    if (Status st = check_gpu_requested(**c, tri_req.device); !st.is_ok()) return void(code = fail(st));
    if (tri_detach) {
      auto id = submit_request(**c, *request);
      if (!id.is_ok()) return void(code = fail(id.status()));
      if (g.json) print_json({{"job", *id}});
      else std::printf("%llu\n", static_cast<unsigned long long>(*id));
      return;
    }
    code = run_and_report(g, *c, *request);
  });

  bool all = false;
  auto* jobs = app.add_subcommand("jobs", "list your jobs (with -q: their ids only, one a line)");
  jobs->add_flag("--all", all, "everybody's jobs (root only)");
  JobFilter filter;
  jobs->add_option("--state", filter.states,
                   "only jobs in these states, comma-separated: pending, running, completed, "
                   "completed_with_warning, failed, cancelled")
      ->check(job_state_list_validator());
  jobs->add_option("--type", filter.types,
                   "only jobs of these types, comma-separated (dense_solve, tridiag_solve, matrix_create, "
                   "matrix_import, matrix_export, matrix_delete)");
  jobs->callback([&] {
    const auto keep_matching = [&filter](nlohmann::json& r) {  // for --json too
      nlohmann::json shown = nlohmann::json::array();
      for (const auto& j : r.value("jobs", nlohmann::json::array())) {
        if (job_matches(j, filter)) shown.push_back(j);
      }
      r["jobs"] = std::move(shown);
    };
    code = simple_call(g, MessageType::kJobs, {{"all", all}}, [&](const nlohmann::json& r) {
      if (g.quiet) {
        for (const auto& j : r["jobs"]) std::printf("%s\n", j.value("id", nlohmann::json(0)).dump().c_str());
      } else {
        std::printf("%s", jobs_table(r["jobs"]).c_str());
      }
    }, nullptr, keep_matching);
  });

  uint64_t job_id = 0;
  std::string out_path;
  auto add_job_arg = [&](CLI::App* cmd) { cmd->add_option("job", job_id, "job id")->required(); };

  auto* status = app.add_subcommand(
      "status", "show one job; exits as its state: 1 FAILED, 4 CANCELLED, 6 COMPLETED_WITH_WARNING, else 0");
  add_job_arg(status);
  status->callback([&] {
    std::string state;
    code = simple_call(g, MessageType::kStatus, {{"job", job_id}}, [&](const nlohmann::json& job) {
      print_job(job);
    }, &state);
    if (code == kExitOk) code = exit_code_of_state(state);
  });

  auto* watch = app.add_subcommand("watch", "follow a job's progress until it ends");
  add_job_arg(watch);
  watch->callback([&] {
    auto c = connect_retrying(reconnect_policy(g));  // the daemon may be restarting right now
    if (!c.is_ok()) return void(code = fail(c.status()));
    ProgressDisplay display(!g.json);
    auto done = follow_job_reconnecting(*c, job_id, &display, reconnect_policy(g));
    if (!done.is_ok()) return void(code = fail(done.status()));
    code = report_job(g, *done);
  });

  auto* cancel = app.add_subcommand("cancel", "cancel a job (pending or running)");
  add_job_arg(cancel);
  cancel->callback([&] {
    code = simple_call(g, MessageType::kCancel, {{"job", job_id}}, [](const nlohmann::json& j) {
      std::printf("job %s: cancel requested (state %s)\n", j.value("id", nlohmann::json(0)).dump().c_str(),
                  j.value("state", std::string()).c_str());
    });
  });

  auto* result = app.add_subcommand("result", "stream a job's solution (solve, tridiag) into an .npy file");
  add_job_arg(result);
  result->add_option("-o,--out", out_path, "output .npy path")->required();
  result->callback([&] {
    auto c = open(g);
    if (!c.is_ok()) return void(code = fail(c.status()));
    std::vector<int64_t> shape;
    auto rows = fetch_result(**c, job_id, absolute(out_path), &shape);
    if (!rows.is_ok()) return void(code = fail(rows.status()));
    if (g.json) print_json({{"job", job_id}, {"rows", *rows}, {"shape", shape}, {"path", out_path}});
    else std::printf("wrote %s, shape %s\n", out_path.c_str(), protocol::format_shape(shape).c_str());
  });

  auto* logs = app.add_subcommand("logs", "print a job's log lines (-f: and the new ones until it ends)");
  add_job_arg(logs);
  bool follow = false;
  logs->add_flag("-f,--follow", follow,
                 "keep printing new lines until the job ends, then exit as `status` does (--json: a JSON "
                 "string per line)");
  logs->callback([&] {
    if (follow) return void(code = follow_logs(g, job_id));
    code = simple_call(g, MessageType::kLogs, {{"job", job_id}}, [](const nlohmann::json& r) {
      for (const auto& l : r.value("lines", nlohmann::json::array())) std::printf("%s\n", l.get<std::string>().c_str());
    });
  });

  auto* trace = app.add_subcommand("trace", "a job's Chrome trace-event JSON (chrome://tracing, Perfetto)");
  add_job_arg(trace);
  trace->add_option("-o,--out", out_path, "write to this file instead of stdout");
  trace->callback([&] {
    auto c = open(g);
    if (!c.is_ok()) return void(code = fail(c.status()));
    auto r = (*c)->call(MessageType::kTrace, {{"job", job_id}});
    if (!r.is_ok()) return void(code = fail(r.status()));
    const std::string text = (*r)["trace"].dump();
    if (out_path.empty()) {
      std::printf("%s\n", text.c_str());
    } else {
      // Like every output: a new temporary beside the target, renamed once complete.
      auto out = OutputFile::create(out_path, "--out");
      if (!out.is_ok()) return void(code = fail(out.status()));
      const std::string line = text + "\n";
      if (::write(out->fd(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        return void(code = fail(Status::from_errno(errno, "write " + out->temporary())));
      }
      if (Status st = out->commit(); !st.is_ok()) return void(code = fail(st));
    }
  });

  auto* metrics = app.add_subcommand("metrics", "daemon metrics in the Prometheus text format");
  metrics->callback([&] {
    code = simple_call(g, MessageType::kMetrics, {}, [](const nlohmann::json& r) {
      std::fputs(r.value("text", std::string()).c_str(), stdout);
    });
  });

  // matrix management
  auto* matrix = app.add_subcommand("matrix", "manage stored matrices");
  matrix->require_subcommand(1);
  std::string name, path, generator = "uniform";
  int64_t n = 0, seed = 1, stripe_rows = 0;
  auto* mcreate = matrix->add_subcommand("create", "create a matrix from a generator");
  mcreate->add_option("name", name, "name of the new matrix in the store")->required();
  mcreate->add_option("-n,--n", n, "order of the matrix")->required()->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  mcreate->add_option("--generator", generator,
                      "uniform (on [-0.5, 0.5]), diag_dominant, normal, identity, hilbert, "
                      "gepp_growth (= wilkinson), wilkinson_t, graded, near_singular "
                      "(docs/protocol.md, matrix_create)");
  mcreate->add_option("--seed", seed, "generator seed");
  mcreate->add_option("--stripe-rows", stripe_rows, "stripe height (0: planner default)");
  mcreate->callback([&] {
    code = run_matrix_job(g, JobRequest({{"type", "matrix_create"}, {"name", name}, {"n", n},
                                            {"generator", generator}, {"seed", seed},
                                            {"stripe_rows", stripe_rows}}));
  });
  auto* mimport = matrix->add_subcommand(
      "import", "import a .npy file (this command opens it; the daemon reads it through the descriptor)");
  mimport->add_option("name", name, "name of the new matrix in the store")->required();
  mimport->add_option("file", path, ".npy file: a square float64 or float32 array, C or Fortran order, "
                                    "either byte order")->required();
  mimport->add_option("--stripe-rows", stripe_rows, "stripe height (0: planner default)");
  mimport->callback([&] {
    auto request = build_import_job(name, path, stripe_rows);
    code = request.is_ok() ? run_matrix_job(g, std::move(request).value()) : fail(request.status());
  });
  auto* mexport = matrix->add_subcommand(
      "export", "export a matrix to a .npy file (the daemon writes it through a file this command creates)");
  mexport->add_option("name", name, "name of a stored matrix")->required();
  mexport->add_option("file", path, ".npy file to write (float64, C order), put in place when the export is complete")->required();
  mexport->callback([&] {
    auto request = build_export_job(name, path);
    code = request.is_ok() ? run_matrix_job(g, std::move(request).value()) : fail(request.status());
  });
  auto* mls = matrix->add_subcommand("ls", "list stored matrices");
  mls->callback([&] {  // a query, not a job (nothing lands in `jobs` or the log)
    code = simple_call(g, MessageType::kMatrices, nlohmann::json::object(), [](const nlohmann::json& r) {
      std::printf("%s", matrices_table(r.value("matrices", nlohmann::json::array())).c_str());
    });
  });
  auto* mshow = matrix->add_subcommand("show", "show one matrix");
  mshow->add_option("name", name, "name of a stored matrix")->required();
  mshow->callback([&] {
    code = simple_call(g, MessageType::kMatrices, {{"name", name}}, [](const nlohmann::json& r) {
      std::printf("%s", matrix_details(r.value("matrix", nlohmann::json::object())).c_str());
    });
  });
  auto* mrm = matrix->add_subcommand("rm", "delete a matrix");
  mrm->add_option("name", name, "name of a stored matrix (its factors go with it)")->required();
  mrm->callback([&] { code = run_matrix_job(g, JobRequest({{"type", "matrix_delete"}, {"name", name}})); });

  auto* daemon = app.add_subcommand("daemon", "the daemon itself");
  daemon->require_subcommand(1);
  auto* dstatus = daemon->add_subcommand("status", "is the daemon up, and what is it doing");
  dstatus->callback([&] {
    code = simple_call(g, MessageType::kDaemonStatus, {}, [](const nlohmann::json& r) {
      std::printf("%s running, pid %s, uptime %s, socket %s\njobs: %s\n", r.value("daemon", std::string()).c_str(),
                  r.value("pid", nlohmann::json(0)).dump().c_str(),
                  format_duration(r.value("uptime_seconds", 0.0)).c_str(), r.value("socket", std::string()).c_str(),
                  job_counts(r.value("jobs", nlohmann::json::object())).c_str());
      std::printf("dense backend: %s, RAM cache %s\n", r.value("backend", std::string("cpu")).c_str(),
                  format_bytes(r.value("ram_budget", uint64_t{0})).c_str());
      if (const std::string url = r.value("metrics_url", std::string()); !url.empty()) {
        std::printf("metrics for Prometheus: %s\n", url.c_str());
      }
      for (const auto& d : r.value("devices", nlohmann::json::array())) {
        const uint64_t dense = d.value("dense_gpu_memory", uint64_t{0});
        std::printf("GPU %d: %s, %s (%s free), dense solves may use %s, %s held by jobs now\n",
                    d.value("index", 0), d.value("name", std::string()).c_str(),
                    format_bytes(d.value("total_memory", uint64_t{0})).c_str(),
                    format_bytes(d.value("free_memory", uint64_t{0})).c_str(),
                    dense > 0 ? format_bytes(dense).c_str() : "90% of the free memory",
                    format_bytes(d.value("reserved_by_jobs", uint64_t{0})).c_str());
      }
    });
  });
  bool stop_cancel = false;
  auto* dstop = daemon->add_subcommand("stop", "stop the daemon after its jobs finish (--cancel: cancel them)");
  dstop->add_flag("--cancel", stop_cancel, "cancel running and queued jobs instead of finishing them");
  dstop->callback([&] {
    code = simple_call(g, MessageType::kDaemonStop, {{"policy", stop_cancel ? "cancel" : "drain"}},
                       [](const nlohmann::json& r) {
                         std::printf("daemon stopping (%s)\n", r.value("policy", std::string()).c_str());
                       });
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // `stripesolve foo`: CLI11 only says a subcommand is required; name the word it did not know.
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !app.remaining().empty() &&
        app.get_subcommands().empty()) {
      std::vector<std::string> verbs;
      for (const CLI::App* sub : app.get_subcommands({})) verbs.push_back(sub->get_name());
      std::fprintf(stderr, "stripesolve: unknown command '%s' (one of: %s); see stripesolve --help\n",
                   app.remaining().front().c_str(), fmt::format("{}", fmt::join(verbs, ", ")).c_str());
      return kExitUsage;
    }
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  return code;
}
