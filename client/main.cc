// stripesolve: the command-line client of stripesolved (docs/protocol.md). The global options
// and the exit codes are here and in client/cli.h; the verbs are in client/*_verbs.cc.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/build_info.h"
#include "client/cli.h"

namespace {

int run(int argc, char** argv) {
  using namespace stripesolve;
  using namespace stripesolve::client;
  CLI::App app{"stripesolve: client of the stripesolved solver daemon"};
  app.option_defaults()->always_capture_default();  // --help shows every option's default
  app.footer(
      "Exit codes: 0 ok, 1 error or job FAILED, 2 usage, 3 daemon not reachable, 4 job CANCELLED, "
      "5 connection lost mid-reply, 6 job COMPLETED_WITH_WARNING (the result's warning says why), "
      "130 Ctrl-C while waiting (the job keeps running; a second Ctrl-C within 2 s cancels "
      "it).\nSocket: --socket, else $STRIPESOLVE_SOCKET, else "
      "$XDG_RUNTIME_DIR/stripesolve/stripesolved.sock, else "
      "/tmp/stripesolve-$UID/stripesolved.sock.\n"
      "The client talks only to a daemon run by root or by you, or by the uid in --daemon-uid / "
      "$STRIPESOLVE_DAEMON_UID.");
  app.set_version_flag("--version",
                       std::string("stripesolve ") + kVersion + " (commit " + kGitCommit + ", " +
                           kBuildType + ")\nThe daemon's: stripesolve daemon status",
                       "print the version and git commit, exit");
  app.require_subcommand(1);
  app.fallthrough();  // global options also after the verb: `stripesolve jobs --json`
  Globals g;
  app.add_option("--socket", g.socket, "daemon socket path");
  app.add_option(
         "--daemon-uid", g.daemon_uid,
         "accept a daemon run by this uid (besides root and you; default $STRIPESOLVE_DAEMON_UID)")
      ->check(CLI::Range(int64_t{0}, int64_t{0xfffffffe}));
  app.add_flag("--json", g.json, "print replies as JSON");
  app.add_flag("-q,--quiet", g.quiet, "no progress output");
  app.add_option("--reconnect-timeout", g.reconnect_seconds,
                 "solve, watch: seconds to keep reconnecting to a daemon that went away (0: give "
                 "up at once)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 7 * 86400.0));
  int code = kExitOk;
  add_solve_verbs(app, g, code);
  add_job_verbs(app, g, code);
  add_matrix_verbs(app, g, code);
  add_daemon_verbs(app, g, code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // `stripesolve foo`: CLI11 only says a subcommand is required; name the word it did not know.
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !app.remaining().empty() &&
        app.get_subcommands().empty()) {
      std::vector<std::string> verbs;
      for (const CLI::App* sub : app.get_subcommands({})) verbs.push_back(sub->get_name());
      std::fprintf(
          stderr, "stripesolve: unknown command '%s' (one of: %s); see stripesolve --help\n",
          app.remaining().front().c_str(), fmt::format("{}", fmt::join(verbs, ", ")).c_str());
      return kExitUsage;
    }
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  return code;
}

}  // namespace

// An exception that escapes the start-up code (out of memory, a library's) ends the process with
// its message and 1, not with std::terminate's abort.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stripesolve: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "stripesolve: an unknown exception\n");
  }
  return 1;
}
