// matrix create, import, export, ls, show and rm: managing the daemon's store (client/cli.h).
// ls and show are queries (no job); the others are jobs the client waits for.
#include <cstdio>
#include <memory>
#include <string>

#include "base/units.h"
#include "client/cli.h"
#include "client/human_output.h"
#include "client/preflight.h"

namespace stripesolve::client {
namespace {

using protocol::MessageType;

// Waits for a matrix job and prints its result for people: the matrix's fields (create,
// import), what was deleted or exported.
int run_matrix_job(const Globals& g, JobRequest request) {
  auto c = connect_to_daemon(g);
  if (!c.is_ok()) return fail(c.status());
  auto r = wait_request(**c, request);
  if (!r.is_ok()) return fail(r.status());
  if (Status st = finish_output(request, *r); !st.is_ok()) return fail(st);
  const std::string state = r->value("state", std::string());
  if (state != "COMPLETED") return report_job(g, *r);
  const auto& result = r->value("result", nlohmann::json::object());
  if (g.json) {
    print_json(result);
    return kExitOk;
  }
  if (result.contains("deleted")) {
    std::printf("deleted %s\n", result.value("deleted", std::string()).c_str());
    for (const auto& f : result.value("factors_deleted", nlohmann::json::array())) {
      std::printf("deleted its factor %s\n",
                  f.is_string() ? f.get<std::string>().c_str() : f.dump().c_str());
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

struct MatrixOptions {
  std::string name, path, generator = "uniform";
  int64_t n = 0, seed = 1, stripe_rows = 0;
};

}  // namespace

void add_matrix_verbs(CLI::App& app, const Globals& g, int& code) {
  auto* matrix = app.add_subcommand("matrix", "manage stored matrices");
  matrix->require_subcommand(1);
  auto o = std::make_shared<MatrixOptions>();

  auto* create = matrix->add_subcommand("create", "create a matrix from a generator");
  create->add_option("name", o->name, "name of the new matrix in the store")->required();
  create->add_option("-n,--n", o->n, "order of the matrix")
      ->required()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  create->add_option("--generator", o->generator,
                     "uniform (on [-0.5, 0.5]), diag_dominant, normal, identity, hilbert, "
                     "gepp_growth (= wilkinson), wilkinson_t, graded, near_singular "
                     "(docs/protocol.md, matrix_create)");
  create->add_option("--seed", o->seed, "generator seed");
  create->add_option("--stripe-rows", o->stripe_rows, "stripe height (0: planner default)");
  create->callback([o, &g, &code] {
    code = run_matrix_job(g, JobRequest({{"type", "matrix_create"},
                                         {"name", o->name},
                                         {"n", o->n},
                                         {"generator", o->generator},
                                         {"seed", o->seed},
                                         {"stripe_rows", o->stripe_rows}}));
  });

  auto* import = matrix->add_subcommand(
      "import",
      "import a .npy file (this command opens it; the daemon reads it through the descriptor)");
  import->add_option("name", o->name, "name of the new matrix in the store")->required();
  import
      ->add_option("file", o->path,
                   ".npy file: a square float64 or float32 array, C or Fortran order, "
                   "either byte order")
      ->required();
  import->add_option("--stripe-rows", o->stripe_rows, "stripe height (0: planner default)");
  import->callback([o, &g, &code] {
    if (Status st = check_import_file(o->path); !st.is_ok()) return void(code = fail(st));
  auto request = build_import_job(o->name, o->path, o->stripe_rows);
  code = request.is_ok() ? run_matrix_job(g, std::move(request).value()) : fail(request.status());
});

auto* exp = matrix->add_subcommand(
    "export",
    "export a matrix to a .npy file (the daemon writes it through a file this command creates)");
exp->add_option("name", o->name, "name of a stored matrix")->required();
exp->add_option("file", o->path,
                ".npy file to write (float64, C order), put in place when the export is complete")
    ->required();
exp->callback([o, &g, &code] {
  auto request = build_export_job(o->name, o->path);
  code = request.is_ok() ? run_matrix_job(g, std::move(request).value()) : fail(request.status());
});

matrix->add_subcommand("ls", "list stored matrices")->callback([&g, &code] {
  code =
      simple_call(g, MessageType::kMatrices, nlohmann::json::object(), [](const nlohmann::json& r) {
        std::printf("%s", matrices_table(r.value("matrices", nlohmann::json::array())).c_str());
      });
});

auto* show = matrix->add_subcommand("show", "show one matrix");
show->add_option("name", o->name, "name of a stored matrix")->required();
show->callback([o, &g, &code] {
  code = simple_call(g, MessageType::kMatrices, {{"name", o->name}}, [](const nlohmann::json& r) {
    std::printf("%s", matrix_details(r.value("matrix", nlohmann::json::object())).c_str());
  });
});

auto* rm = matrix->add_subcommand("rm", "delete a matrix");
rm->add_option("name", o->name, "name of a stored matrix (its factors go with it)")->required();
rm->callback([o, &g, &code] {
  code = run_matrix_job(g, JobRequest({{"type", "matrix_delete"}, {"name", o->name}}));
});
}  // namespace stripesolve::client

}  // namespace stripesolve::client
