#include "client/cli.h"

#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "base/units.h"
#include "client/human_output.h"
#include "client/interrupt.h"
#include "client/progress.h"
#include "protocol/socket_path.h"

namespace stripesolve::client {
namespace {

using protocol::MessageType;

bool connected_once = false;  // a lost connection after this one is "lost", not "unreachable"

void print_job(const nlohmann::json& j) {
  std::printf("%s", job_details(j).c_str());
}

// The first Ctrl-C while a job runs: the job goes on, the client stops waiting (its partial
// output removed), and a second press within 2 s cancels the job.
int interrupted(const Globals& g, uint64_t id, JobRequest& request, int presses) {
  (void)finish_output(request, {{"state", "INTERRUPTED"}});  // removes the partial file
  std::fprintf(
      stderr,
      "\nstripesolve: job %llu keeps running; Ctrl-C again within 2 s cancels it; fetch it "
      "later with 'stripesolve result %llu'\n",
      static_cast<unsigned long long>(id), static_cast<unsigned long long>(id));
  if (!InterruptWatch::another_press_within(presses, std::chrono::milliseconds(2000))) {
    return kExitInterrupted;
  }
  auto c = connect_to_daemon(g);
  if (!c.is_ok()) return fail(c.status());
  auto r = (*c)->call(MessageType::kCancel, {{"job", id}});
  if (!r.is_ok()) return fail(r.status());
  std::fprintf(stderr, "stripesolve: job %llu cancelled\n", static_cast<unsigned long long>(id));
  return kExitCancelled;
}

}  // namespace

int fail(const Status& st) {
  std::fprintf(stderr, "stripesolve: %s\n", st.message().c_str());
  if (st.code() == StatusCode::kUnavailable) return connected_once ? kExitLost : kExitUnreachable;
  if (st.code() == StatusCode::kCancelled) return kExitCancelled;
  return kExitError;
}

Result<std::unique_ptr<Connection>> connect_to_daemon(const Globals& g) {
  std::optional<uid_t> daemon_uid;
  if (g.daemon_uid >= 0) daemon_uid = static_cast<uid_t>(g.daemon_uid);
  auto c = Connection::connect(protocol::resolve_socket_path(g.socket), "stripesolve", daemon_uid);
  if (c.is_ok()) connected_once = true;
  return c;
}

ReconnectPolicy reconnect_policy(const Globals& g) {
  ReconnectPolicy p;
  p.seconds = g.reconnect_seconds;
  p.connect = [&g] { return connect_to_daemon(g); };
  return p;
}

void print_json(const nlohmann::json& j) {
  std::printf("%s\n", j.dump(2).c_str());
}

int report_job(const Globals& g, const nlohmann::json& job) {
  const std::string state = job.value("state", std::string());
  if (g.json) {
    print_json(job);
  } else if ((state == "COMPLETED" || state == "COMPLETED_WITH_WARNING") &&
             job.value("type", std::string()) == "dense_solve") {
    const auto& r = job.value("result", nlohmann::json::object());
    const std::string where = r.value("device", r.value("backend", std::string()));
    // With reused factors nothing was factored: no rate to print.
    const bool reused = r.value("reused_factors", false);
    const std::string rate =
        reused ? std::string() : client::format_flop_rate(r.value("gflops", 0.0)) + ", ";
    std::printf("job %s %s: n = %s, residual = %.3e, %s%.2f s%s%s\n",
                job.value("id", nlohmann::json(0)).dump().c_str(), state.c_str(),
                r.value("shape", nlohmann::json::array({0})).at(0).dump().c_str(),
                r.value("residual", 0.0), rate.c_str(), r.value("seconds", 0.0),
                where.empty() ? "" : (" on " + where).c_str(), reused ? " (reused factors)" : "");
    // -1: not computed / estimated / tracked (docs/protocol.md says when).
    auto figure = [](double v) { return v < 0 ? std::string("n/a") : fmt::format("{:.3e}", v); };
    std::printf(
        "backward error %s (tolerance %s, %s refinement step(s)), rcond estimate %s, "
        "pivot growth %s\n",
        figure(r.value("backward_error", -1.0)).c_str(), figure(r.value("tolerance", -1.0)).c_str(),
        r.value("refinement_steps", nlohmann::json(0)).dump().c_str(),
        figure(r.value("rcond", -1.0)).c_str(), figure(r.value("growth", -1.0)).c_str());
    if (r.contains("pivot_switch")) {
      std::printf("%s\n", r.value("pivot_switch", std::string()).c_str());
    }
    if (job.contains("warning")) {
      std::fprintf(stderr, "stripesolve: warning: job %s: %s\n",
                   job.value("id", nlohmann::json(0)).dump().c_str(),
                   job.value("warning", std::string()).c_str());
    }
  } else if ((state == "COMPLETED" || state == "COMPLETED_WITH_WARNING") &&
             job.value("type", std::string()) == "tridiag_solve") {
    const auto& r = job.value("result", nlohmann::json::object());
    std::printf(
        "job %s %s: %s systems, %s unknowns (%s), %s on the %s in %.3f s, max relative residual "
        "%.3e\n",
        job.value("id", nlohmann::json(0)).dump().c_str(), state.c_str(),
        r.value("systems", nlohmann::json(0)).dump().c_str(),
        r.value("unknowns", nlohmann::json(0)).dump().c_str(),
        r.value("layout", std::string()).c_str(), r.value("algorithm", std::string()).c_str(),
        r.value("device", std::string()).c_str(), r.value("seconds", 0.0),
        r.value("max_relative_residual", 0.0));
    std::printf(
        "backward error %.3e (tolerance %.3e, system %s), %s systems fell back to gepp%s\n",
        r.value("backward_error", 0.0), r.value("tolerance", 0.0),
        r.value("worst_backward_system", nlohmann::json(0)).dump().c_str(),
        r.value("fell_back", nlohmann::json(0)).dump().c_str(),
        r.value("fell_back", 0) > 0
            ? (" (first: " + r.value("fell_back_systems", nlohmann::json::array()).dump() + ")")
                  .c_str()
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
      std::fprintf(stderr, "stripesolve: warning: job %s: %s\n",
                   job.value("id", nlohmann::json(0)).dump().c_str(),
                   job.value("warning", std::string()).c_str());
    }
    return kExitWarning;
  }
  if (state == "CANCELLED") return kExitCancelled;
  if (!g.json && job.contains("error")) {
    std::fprintf(stderr, "stripesolve: job %s %s: %s\n",
                 job.value("id", nlohmann::json(0)).dump().c_str(), state.c_str(),
                 job["error"].value("message", std::string()).c_str());
  }
  return kExitError;
}

int exit_code_of_state(const std::string& state) {
  if (state == "FAILED") return kExitError;
  if (state == "CANCELLED") return kExitCancelled;
  if (state == "COMPLETED_WITH_WARNING") return kExitWarning;
  return kExitOk;
}

int simple_call(const Globals& g, MessageType type, nlohmann::json header,
                const std::function<void(const nlohmann::json&)>& human, std::string* state,
                const std::function<void(nlohmann::json&)>& adjust) {
  auto c = connect_to_daemon(g);
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

int run_and_report(const Globals& g, std::unique_ptr<Connection>& c, JobRequest& request) {
  auto id = submit_request(*c, request);
  if (!id.is_ok()) return fail(id.status());
  request.files.clear();  // the daemon holds its own descriptors now
  if (!g.json && !g.quiet)
    std::fprintf(stderr, "submitted job %llu\n", static_cast<unsigned long long>(*id));
  ProgressDisplay display(!g.quiet && !g.json);
  InterruptWatch ctrl_c;
  const auto on_interrupt = [] {
    return InterruptWatch::presses() > 0 ? Status::cancelled("interrupted") : Status::ok();
  };
  c->set_interrupt_check(on_interrupt);
  ReconnectPolicy policy = reconnect_policy(g);
  policy.connect = [&g, on_interrupt]() -> Result<std::unique_ptr<Connection>> {
    STRIPESOLVE_ASSIGN_OR_RETURN(auto fresh, connect_to_daemon(g));
    fresh->set_interrupt_check(on_interrupt);
    return fresh;
  };
  auto done = follow_job_reconnecting(c, *id, &display, policy);
  if (InterruptWatch::presses() > 0) return interrupted(g, *id, request, InterruptWatch::presses());
  if (!done.is_ok()) return fail(done.status());
  if (Status st = finish_output(request, *done); !st.is_ok()) return fail(st);
  return report_job(g, *done);
}

}  // namespace stripesolve::client
