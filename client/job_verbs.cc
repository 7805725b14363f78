// jobs, status, watch, cancel, result, logs, trace and metrics: the verbs about jobs that exist
// (client/cli.h).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "client/cli.h"
#include "client/human_output.h"
#include "client/local_files.h"
#include "client/progress.h"
#include "protocol/npy.h"

namespace stripesolve::client {
namespace {

using protocol::MessageType;

// `jobs --state`: a comma-separated list of job states, any case.
CLI::Validator job_state_list_validator() {
  return CLI::Validator(
      [](std::string& list) -> std::string {
        static const std::vector<std::string> states = {
            "pending", "running", "completed", "completed_with_warning", "failed", "cancelled"};
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

// `logs -f`: asks for the lines after the last it printed every half second until the job has
// ended (the daemon reads the state before the lines, so none is missed).
int follow_logs(const Globals& g, uint64_t job_id) {
  auto c = connect_to_daemon(g);
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

struct JobsOptions {
  bool all = false;
  JobFilter filter;
};

void add_jobs(CLI::App& app, const Globals& g, int& code) {
  auto o = std::make_shared<JobsOptions>();
  auto* cmd = app.add_subcommand("jobs", "list your jobs (with -q: their ids only, one a line)");
  cmd->add_flag("--all", o->all, "everybody's jobs (root only)");
  cmd->add_option("--state", o->filter.states,
                  "only jobs in these states, comma-separated: pending, running, completed, "
                  "completed_with_warning, failed, cancelled")
      ->check(job_state_list_validator());
  cmd->add_option(
      "--type", o->filter.types,
      "only jobs of these types, comma-separated (dense_solve, tridiag_solve, matrix_create, "
      "matrix_import, matrix_export, matrix_delete)");
  cmd->callback([o, &g, &code] {
    const auto keep_matching = [&o](nlohmann::json& r) {  // for --json too
      nlohmann::json shown = nlohmann::json::array();
      for (const auto& j : r.value("jobs", nlohmann::json::array())) {
        if (job_matches(j, o->filter)) shown.push_back(j);
      }
      r["jobs"] = std::move(shown);
    };
    code = simple_call(
        g, MessageType::kJobs, {{"all", o->all}},
        [&g](const nlohmann::json& r) {
          if (g.quiet) {
            for (const auto& j : r["jobs"])
              std::printf("%s\n", j.value("id", nlohmann::json(0)).dump().c_str());
          } else {
            std::printf("%s", jobs_table(r["jobs"]).c_str());
          }
        },
        nullptr, keep_matching);
  });
}

// A verb about one job: `stripesolve VERB JOB`.
CLI::App* job_verb(CLI::App& app, const std::string& name, const std::string& help, uint64_t& id) {
  auto* cmd = app.add_subcommand(name, help);
  cmd->add_option("job", id, "job id")->required();
  return cmd;
}

struct OneJob {
  uint64_t id = 0;
  std::string out;      // result, trace: -o
  bool follow = false;  // logs -f
};

void add_one_job_verbs(CLI::App& app, const Globals& g, int& code) {
  auto status = std::make_shared<OneJob>();
  job_verb(
      app, "status",
      "show one job; exits as its state: 1 FAILED, 4 CANCELLED, 6 COMPLETED_WITH_WARNING, else 0",
      status->id)
      ->callback([status, &g, &code] {
        std::string state;
        code = simple_call(
            g, MessageType::kStatus, {{"job", status->id}},
            [](const nlohmann::json& job) { std::printf("%s", job_details(job).c_str()); }, &state);
        if (code == kExitOk) code = exit_code_of_state(state);
      });

  auto watch = std::make_shared<OneJob>();
  job_verb(app, "watch", "follow a job's progress until it ends", watch->id)
      ->callback([watch, &g, &code] {
        auto c = connect_retrying(reconnect_policy(g));  // the daemon may be restarting right now
        if (!c.is_ok()) return void(code = fail(c.status()));
        ProgressDisplay display(!g.json);
        auto done = follow_job_reconnecting(*c, watch->id, &display, reconnect_policy(g));
        if (!done.is_ok()) return void(code = fail(done.status()));
        code = report_job(g, *done);
      });

  auto cancel = std::make_shared<OneJob>();
  job_verb(app, "cancel", "cancel a job (pending or running)", cancel->id)
      ->callback([cancel, &g, &code] {
        code = simple_call(g, MessageType::kCancel, {{"job", cancel->id}},
                           [](const nlohmann::json& j) {
                             std::printf("job %s: cancel requested (state %s)\n",
                                         j.value("id", nlohmann::json(0)).dump().c_str(),
                                         j.value("state", std::string()).c_str());
                           });
      });

  auto result = std::make_shared<OneJob>();
  auto* rcmd = job_verb(app, "result", "stream a job's solution (solve, tridiag) into an .npy file",
                        result->id);
  rcmd->add_option("-o,--out", result->out, "output .npy path")->required();
  rcmd->callback([result, &g, &code] {
    auto c = connect_to_daemon(g);
    if (!c.is_ok()) return void(code = fail(c.status()));
    std::vector<int64_t> shape;
    auto rows =
        fetch_result(**c, result->id, std::filesystem::absolute(result->out).string(), &shape);
    if (!rows.is_ok()) return void(code = fail(rows.status()));
    if (g.json)
      print_json({{"job", result->id}, {"rows", *rows}, {"shape", shape}, {"path", result->out}});
    else
      std::printf("wrote %s, shape %s\n", result->out.c_str(),
                  protocol::format_shape(shape).c_str());
  });

  auto logs = std::make_shared<OneJob>();
  auto* lcmd = job_verb(app, "logs", "print a job's log lines (-f: and the new ones until it ends)",
                        logs->id);
  lcmd->add_flag(
      "-f,--follow", logs->follow,
      "keep printing new lines until the job ends, then exit as `status` does (--json: a JSON "
      "string per line)");
  lcmd->callback([logs, &g, &code] {
    if (logs->follow) return void(code = follow_logs(g, logs->id));
    code = simple_call(g, MessageType::kLogs, {{"job", logs->id}}, [](const nlohmann::json& r) {
      for (const auto& l : r.value("lines", nlohmann::json::array()))
        std::printf("%s\n", l.get<std::string>().c_str());
    });
  });

  auto trace = std::make_shared<OneJob>();
  auto* tcmd = job_verb(app, "trace",
                        "a job's Chrome trace-event JSON (chrome://tracing, Perfetto)", trace->id);
  tcmd->add_option("-o,--out", trace->out, "write to this file instead of stdout");
  tcmd->callback([trace, &g, &code] {
    auto c = connect_to_daemon(g);
    if (!c.is_ok()) return void(code = fail(c.status()));
    auto r = (*c)->call(MessageType::kTrace, {{"job", trace->id}});
    if (!r.is_ok()) return void(code = fail(r.status()));
    const nlohmann::json& t = (*r)["trace"];
    if (t.value("traceEvents", nlohmann::json::array()).empty()) {
      const nlohmann::json other = t.value("otherData", nlohmann::json::object());
      std::fprintf(stderr, "stripesolve: job %llu: %s\n",
                   static_cast<unsigned long long>(trace->id),
                   other.value("note", std::string("no trace events")).c_str());
    }
    const std::string text = t.dump();
    if (trace->out.empty()) return void(std::printf("%s\n", text.c_str()));
    // Like every output: a new temporary beside the target, renamed once complete.
    auto out = OutputFile::create(trace->out, "--out");
    if (!out.is_ok()) return void(code = fail(out.status()));
    const std::string line = text + "\n";
    if (::write(out->fd(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return void(code = fail(Status::from_errno(errno, "write " + out->temporary())));
    }
    if (Status st = out->commit(); !st.is_ok()) code = fail(st);
  });
}

}  // namespace

void add_job_verbs(CLI::App& app, const Globals& g, int& code) {
  add_jobs(app, g, code);
  add_one_job_verbs(app, g, code);
  app.add_subcommand("metrics", "daemon metrics in the Prometheus text format")
      ->callback([&g, &code] {
        code = simple_call(g, MessageType::kMetrics, {}, [](const nlohmann::json& r) {
          std::fputs(r.value("text", std::string()).c_str(), stdout);
        });
      });
}

}  // namespace stripesolve::client
