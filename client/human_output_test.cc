#include "client/human_output.h"

#include <sstream>

#include <gtest/gtest.h>

namespace stripesolve::client {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(HumanOutput, TableColumnsLineUpUnderTheirHeaders) {
  const auto lines = lines_of(
      format_table({"ID", "NAME", "STATE"}, {{"7", "a-long-name", "RUNNING"}, {"12", "b", ""}}));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "ID  NAME         STATE");
  EXPECT_EQ(lines[1], "7   a-long-name  RUNNING");
  EXPECT_EQ(lines[2], "12  b");  // no trailing blanks
}

TEST(HumanOutput, MatricesTableShowsSizesAndNamesCorruptEntries) {
  const nlohmann::json list = nlohmann::json::parse(R"([
    {"name": "A", "n": 4096, "stripe_rows": 512, "stripes": 8, "kind": "matrix", "state": "complete",
     "stored_bytes": 134217728, "created": "2026-11-26T03:00:00Z"},
    {"name": "B", "kind": "matrix", "state": "corrupt", "problem": "manifest.json: bad checksum"}])");
  const auto lines = lines_of(matrices_table(list));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].find("NAME"), 0u);
  EXPECT_NE(lines[0].find("ORDER"), std::string::npos);
  EXPECT_NE(lines[1].find("4096"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("128.00 MiB"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("ORDER"), std::string::npos);
  EXPECT_NE(lines[2].find("CORRUPT"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3],
            "B is corrupt: manifest.json: bad checksum; 'stripesolve matrix rm B' removes it");
  EXPECT_EQ(matrices_table(nlohmann::json::array()), "no matrices in the store\n");
}

TEST(HumanOutput, MatrixDetailsAreLabelledFields) {
  const nlohmann::json info =
      nlohmann::json::parse(R"({"name": "A.lu.row", "n": 1000, "stripe_rows": 256,
    "stripes": 4, "kind": "factors", "state": "complete", "dtype": "float64", "stored_bytes": 8000000,
    "paths": 2, "created": "2026-11-26T03:00:00Z", "source": "solve of A", "id": "abc",
    "factor_of": {"id": "def", "n": 1000}})");
  const std::string text = matrix_details(info);
  EXPECT_NE(text.find("  name:"), std::string::npos) << text;
  EXPECT_NE(text.find("A.lu.row"), std::string::npos);
  EXPECT_NE(text.find("factors of:"), std::string::npos) << text;
  EXPECT_NE(text.find("4 of 256 rows"), std::string::npos) << text;
  EXPECT_NE(text.find("over 2 path(s)"), std::string::npos) << text;
  EXPECT_EQ(text.find('{'), std::string::npos) << "no raw JSON: " << text;
  // Every value starts in the same column.
  size_t column = std::string::npos;
  for (const auto& line : lines_of(text)) {
    const size_t colon = line.find(':');
    ASSERT_NE(colon, std::string::npos) << line;
    const size_t value = line.find_first_not_of(' ', colon + 1);
    if (column == std::string::npos) column = value;
    EXPECT_EQ(value, column) << line;
  }
}

TEST(HumanOutput, ResultDetailsFlattenNestedObjects) {
  const nlohmann::json result =
      nlohmann::json::parse(R"({"n": 8, "quality": {"rcond": 0.5}, "device": "cpu"})");
  const std::string text = result_details(result);
  EXPECT_NE(text.find("quality.rcond:"), std::string::npos) << text;
  EXPECT_NE(text.find("device:"), std::string::npos) << text;
  EXPECT_EQ(text.find('{'), std::string::npos) << text;
}

TEST(HumanOutput, JobDetailsNameStateErrorAndResult) {
  const nlohmann::json job =
      nlohmann::json::parse(R"({"id": 7, "type": "dense_solve", "state": "FAILED",
    "owner_uid": 1000, "created": "2026-11-26T04:00:00Z", "started": "2026-11-26T04:00:01Z",
    "error": {"code": "Numerical", "message": "zero pivot at row 3"}})");
  const std::string text = job_details(job);
  EXPECT_EQ(text.rfind("job 7 (dense_solve): FAILED\n", 0), 0u) << text;
  EXPECT_NE(text.find("error:     Numerical: zero pivot at row 3"), std::string::npos) << text;
  EXPECT_EQ(text.find("finished"), std::string::npos) << text;
  EXPECT_EQ(text.find("result:"), std::string::npos) << text;
  const nlohmann::json done = {{"id", 8},
                               {"type", "t"},
                               {"state", "COMPLETED"},
                               {"result", {{"residual", 4.3520192281265e-16}}}};
  EXPECT_NE(job_details(done).find("result:\n  residual: 4.35202e-16\n"), std::string::npos)
      << job_details(done);
}

TEST(HumanOutput, JobCountsAreASentence) {
  EXPECT_EQ(
      job_counts({{"running", 2},
                  {"pending", 0},
                  {"completed", 14},
                  {"completed_with_warning", 1},
                  {"failed", 1},
                  {"cancelled", 0},
                  {"submitted_total", 18}}),
      "2 running, 14 completed, 1 completed with a warning, 1 failed (18 submitted since start)");
  EXPECT_EQ(job_counts({{"submitted_total", 0}}), "none (0 submitted since start)");
}

TEST(HumanOutput, JobFiltersTakeListsAndIgnoreCase) {
  const nlohmann::json running = {{"id", 1}, {"type", "dense_solve"}, {"state", "RUNNING"}};
  const nlohmann::json failed = {{"id", 2}, {"type", "tridiag_solve"}, {"state", "FAILED"}};
  EXPECT_TRUE(job_matches(running, {}));
  EXPECT_TRUE(job_matches(running, {"running", ""}));
  EXPECT_FALSE(job_matches(failed, {"running", ""}));
  EXPECT_TRUE(job_matches(failed, {"running,failed", ""}));
  EXPECT_TRUE(job_matches(running, {"", "dense_solve"}));
  EXPECT_FALSE(job_matches(running, {"running", "tridiag_solve"}));
  EXPECT_FALSE(job_matches(running, {"run", ""}));  // whole names only
}

}  // namespace
}  // namespace stripesolve::client
