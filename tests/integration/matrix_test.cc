// Integration: matrix management through the socket (and the CLI binary), against the real store.
#include <sys/wait.h>

#include <cstdlib>
#include <memory>

#include <gtest/gtest.h>

#include "client/commands.h"
#include "client/connection.h"
#include "daemon/matrix_jobs.h"
#include "storage/generators.h"
#include "tests/integration/daemon_fixture.h"

namespace stripesolve::testing {
namespace {

TEST(MatrixIntegration, CreateListShowReadBackDelete) {
  DaemonFixture d;
  auto c = d.connect();
  auto created = client::run_job(*c, {{"type", "matrix_create"},
                                      {"name", "A"},
                                      {"n", 300},
                                      {"generator", "uniform"},
                                      {"seed", 7},
                                      {"stripe_rows", 64}});
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  ASSERT_EQ((*created)["state"], "COMPLETED") << created->dump();
  EXPECT_EQ((*created)["result"]["n"], 300);
  EXPECT_EQ((*created)["result"]["stripes"], 5);

  // Read a stripe part back from the store and compare with the generator.
  auto m = d.daemon().store().open_matrix("A");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const auto layout = (*m)->part_layout(2, 10);
  std::unique_ptr<std::byte, decltype(&std::free)> buf(
      static_cast<std::byte*>(std::aligned_alloc(4096, layout.buffer_bytes)), &std::free);
  ASSERT_TRUE((*m)->read_part(2, 10, buf.get()).is_ok());
  const auto& g = (*m)->geometry();
  const double* part = reinterpret_cast<const double*>(buf.get() + layout.data_offset);
  const int64_t h = g.rows(2);
  storage::GeneratorSpec spec{"uniform", 7};
  double norm = 0;
  for (int64_t col = 10; col < 300; col += 37) {
    for (int64_t r = 0; r < h; ++r) {
      const double v = part[(col - 10) * h + r];
      EXPECT_EQ(v, storage::generated_value(spec, 300, g.row_begin(2) + r, col));
      norm += std::abs(v);
    }
  }
  EXPECT_GT(norm, 0.0);
  m->reset();

  auto dup = client::run_job(*c, {{"type", "matrix_create"}, {"name", "A"}, {"n", 10}});
  ASSERT_TRUE(dup.is_ok());
  EXPECT_EQ((*dup)["state"], "FAILED");
  EXPECT_EQ((*dup)["error"]["code"], "AlreadyExists");

  auto list = client::list_matrices(*c);
  ASSERT_TRUE(list.is_ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0]["name"], "A");

  auto show = client::show_matrix(*c, "A");
  ASSERT_TRUE(show.is_ok());
  EXPECT_EQ((*show)["stripe_rows"], 64);

  auto bad = client::run_job(*c, {{"type", "matrix_create"}, {"name", "B"}, {"n", -4}});
  ASSERT_TRUE(bad.is_ok());
  EXPECT_EQ((*bad)["error"]["message"], "field 'n' is -4, must be in [1, 1099511627776]");

  auto rm = client::run_job(*c, {{"type", "matrix_delete"}, {"name", "A"}});
  ASSERT_TRUE(rm.is_ok());
  EXPECT_EQ((*rm)["state"], "COMPLETED");
  EXPECT_EQ(client::show_matrix(*c, "A").status().code(), StatusCode::kNotFound);
  // Queries are not jobs: the old job types are gone.
  auto as_job = client::run_job(*c, {{"type", "matrix_list"}});
  EXPECT_FALSE(as_job.is_ok());
}

TEST(MatrixIntegration, CliVerbsWithJsonAndExitCodes) {
  DaemonFixture d;
  Cli cli(d);
  const auto run = [&cli](const std::string& args) { return cli.run(args); };
  EXPECT_EQ(run("matrix create M -n 100 --seed 3"), 0);
  EXPECT_EQ(run("--json matrix ls"), 0);
  EXPECT_EQ(run("--json matrix show M"), 0);
  EXPECT_EQ(run("matrix show nope"), 1);
  EXPECT_EQ(run("--json jobs"), 0);
  EXPECT_EQ(run("--json daemon status"), 0);
  EXPECT_EQ(run("metrics"), 0);
  EXPECT_EQ(run("status"), 2);  // usage: the job id is missing
  EXPECT_EQ(run("matrix rm M"), 0);
  EXPECT_EQ(std::system((std::string(STRIPESOLVE_CLIENT_BINARY) + " --socket " + d.dir() +
                         "/none.sock jobs > /dev/null 2>&1")
                            .c_str()) >>
                8,
            3);  // unreachable
}

// Queries are not jobs: `matrix ls` / `show` leave `jobs` as it was; human output is tables and
// labelled fields, never raw JSON; `jobs` filters by state and type, -q prints ids only.
TEST(MatrixIntegration, QueriesMakeNoJobsAndPrintTables) {
  DaemonFixture d;
  Cli cli(d);
  const auto run = [&cli](const std::string& args) { return cli.run(args); };
  const std::string& out = cli.out();
  ASSERT_EQ(run("matrix create M -n 100 --seed 3"), 0) << out;
  EXPECT_NE(out.find("order:"), std::string::npos) << out;
  EXPECT_EQ(out.find('{'), std::string::npos) << out;
  ASSERT_EQ(run("matrix ls"), 0) << out;
  EXPECT_EQ(out.find("NAME"), 0u) << out;
  EXPECT_NE(out.find("\nM "), std::string::npos) << out;
  ASSERT_EQ(run("matrix show M"), 0) << out;
  EXPECT_NE(out.find("stripes:"), std::string::npos) << out;
  EXPECT_EQ(out.find('{'), std::string::npos) << out;
  EXPECT_EQ(run("matrix show nope"), 1);
  EXPECT_NE(out.find("no object named 'nope' in the store"), std::string::npos) << out;

  auto c = d.connect();
  auto jobs = c->call(protocol::MessageType::kJobs, {{"all", false}});
  ASSERT_TRUE(jobs.is_ok()) << jobs.status().to_string();
  ASSERT_EQ((*jobs)["jobs"].size(), 1u) << jobs->dump();  // the create only
  EXPECT_EQ((*jobs)["jobs"][0]["type"], "matrix_create");

  ASSERT_EQ(run("-q jobs"), 0) << out;
  EXPECT_EQ(out, (*jobs)["jobs"][0]["id"].dump() + "\n");
  ASSERT_EQ(run("-q jobs --state RUNNING,failed"), 0) << out;
  EXPECT_EQ(out, "");
  ASSERT_EQ(run("-q jobs --state completed --type matrix_create"), 0) << out;
  EXPECT_EQ(out, (*jobs)["jobs"][0]["id"].dump() + "\n");
  ASSERT_EQ(run("--json jobs --type dense_solve"), 0) << out;
  EXPECT_TRUE(nlohmann::json::parse(out)["jobs"].empty()) << out;
  EXPECT_EQ(run("jobs --state sleeping"), 2) << out;  // usage, before anything is sent
  EXPECT_NE(out.find("unknown job state 'sleeping'"), std::string::npos) << out;

  // logs -f of an ended job: its lines, then the job's exit code; a failed job's is 1.
  const std::string id = (*jobs)["jobs"][0]["id"].dump();
  ASSERT_EQ(run("logs -f " + id), 0) << out;
  EXPECT_NE(out.find("creating matrix 'M'"), std::string::npos) << out;
  ASSERT_EQ(run("matrix create M -n 10"), 1) << out;  // exists already
  auto again = c->call(protocol::MessageType::kJobs, {{"all", false}});
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(run("logs -f " + (*again)["jobs"].back()["id"].dump()), 1) << out;
  ASSERT_EQ(run("daemon status"), 0) << out;
  EXPECT_NE(out.find("jobs: 1 completed, 1 failed (2 submitted since start)"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace stripesolve::testing

namespace stripesolve::testing {
namespace {

TEST(MatrixIntegration, ExportThenImportRoundTrip) {
  DaemonFixture d;
  auto c = d.connect();
  auto created =
      client::run_job(*c, {{"type", "matrix_create"}, {"name", "E"}, {"n", 70}, {"seed", 2}});
  ASSERT_EQ((*created)["state"], "COMPLETED") << created->dump();
  const std::string path = d.dir() + "/E.npy";
  auto export_request = client::build_export_job("E", path);
  ASSERT_TRUE(export_request.is_ok()) << export_request.status().to_string();
  auto exported = client::wait_request(*c, *export_request);
  ASSERT_EQ((*exported)["state"], "COMPLETED") << exported->dump();
  ASSERT_TRUE(client::finish_output(*export_request, *exported).is_ok());
  EXPECT_EQ((*exported)["result"]["bytes"], 128 + 70 * 70 * 8);
  auto import_request = client::build_import_job("F", path, 16);
  ASSERT_TRUE(import_request.is_ok());
  auto imported = client::wait_request(*c, *import_request);
  ASSERT_EQ((*imported)["state"], "COMPLETED") << imported->dump();
  EXPECT_EQ((*imported)["result"]["n"], 70);
  EXPECT_EQ((*imported)["result"]["stripes"], 5);
  EXPECT_EQ((*imported)["result"]["source"], "npy " + path);
  EXPECT_EQ(
      client::build_import_job("G", d.dir() + "/none.npy", 0).status().message(),
      "cannot read matrix file '" + d.dir() + "/none.npy': No such file or directory (errno 2)");
  // The daemon takes no path: an import or export without a passed file is refused.
  auto by_path = client::run_job(*c, {{"type", "matrix_import"}, {"name", "H"}, {"path", path}});
  EXPECT_EQ((*by_path)["state"], "FAILED");
  EXPECT_EQ((*by_path)["error"]["message"], "field 'file' must be {\"fd\": i}");
}

}  // namespace
}  // namespace stripesolve::testing
