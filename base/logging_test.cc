#include "base/logging.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

namespace stripesolve {
namespace {

std::string format_json(std::string_view payload, spdlog::level::level_enum level) {
  spdlog::details::log_msg msg(spdlog::source_loc{}, "storage", level,
                               spdlog::string_view_t(payload.data(), payload.size()));
  spdlog::memory_buf_t buf;
  JsonLineFormatter().format(msg, buf);
  return std::string(buf.data(), buf.size());
}

TEST(JsonLineFormatter, OneValidObjectPerLine) {
  const std::string line = format_json("opened store with 4 paths", spdlog::level::info);
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["logger"], "storage");
  EXPECT_EQ(j["msg"], "opened store with 4 paths");
  EXPECT_TRUE(j["thread"].is_number_integer());
  const std::string ts = j["ts"];
  ASSERT_EQ(ts.size(), 27u) << ts;  // 2026-11-22T05:01:02.123456Z
  EXPECT_EQ(ts[10], 'T');
  EXPECT_EQ(ts.back(), 'Z');
}

TEST(JsonLineFormatter, EscapesHostileText) {
  const std::string payload = "quote \" backslash \\ newline \n tab \t bell \x07 bad \xff end";
  const std::string line = format_json(payload, spdlog::level::warn);
  EXPECT_NE(line.find(R"(quote \" backslash \\ newline \n tab \t bell \u0007 bad )"),
            std::string::npos)
      << line;
  auto j = nlohmann::json::parse(line);  // throws if not valid JSON / UTF-8
  EXPECT_EQ(j["msg"], "quote \" backslash \\ newline \n tab \t bell \x07 bad \xEF\xBF\xBD end");
  EXPECT_EQ(j["level"], "warning");
}

TEST(Logging, WritesJsonFileAndReopens) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "stripesolve_logging_test";
  std::filesystem::remove_all(dir);
  const auto path = dir / "logs" / "daemon.jsonl";
  LogConfig config;
  config.level = "warn";
  config.file_level = "debug";
  config.file = path.string();
  config.stderr_format = "off";
  ASSERT_TRUE(set_up_logging(config).is_ok());

  auto log = logger("cache");
  log->debug("cell {} -> {}", "EMPTY", "DOWNLOADING");
  log->info("line with \"quotes\"");
  log->flush();

  // Simulate rotation: move the file away, reopen, write again.
  const auto rotated = dir / "logs" / "daemon.jsonl.1";
  std::filesystem::rename(path, rotated);
  ASSERT_TRUE(reopen_log_file().is_ok());
  log->error("after rotation");
  log->flush();

  auto read_lines = [](const std::filesystem::path& p) {
    std::vector<nlohmann::json> out;
    std::ifstream in(p);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  };
  auto before = read_lines(rotated);
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(before[0]["msg"], "cell EMPTY -> DOWNLOADING");
  EXPECT_EQ(before[0]["logger"], "cache");
  EXPECT_EQ(before[1]["msg"], "line with \"quotes\"");
  auto after = read_lines(path);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0]["msg"], "after rotation");
  EXPECT_EQ(after[0]["level"], "error");

  ASSERT_TRUE(set_up_logging(LogConfig{}).is_ok());
  std::filesystem::remove_all(dir);
}

TEST(Logging, ConcurrentWritersKeepLinesWhole) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "stripesolve_logging_mt";
  std::filesystem::remove_all(dir);
  LogConfig config;
  config.file = (dir / "mt.jsonl").string();
  config.stderr_format = "off";
  ASSERT_TRUE(set_up_logging(config).is_ok());
  constexpr int kThreads = 4, kLines = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      auto log = logger("role" + std::to_string(t % 2));
      for (int i = 0; i < kLines; ++i) log->info("thread {} line {} \"q\"", t, i);
    });
  }
  for (auto& th : threads) th.join();
  logger("role0")->flush();
  std::ifstream in(dir / "mt.jsonl");
  int count = 0;
  for (std::string line; std::getline(in, line); ++count) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["level"], "info");
  }
  EXPECT_EQ(count, kThreads * kLines);
  ASSERT_TRUE(set_up_logging(LogConfig{}).is_ok());
  std::filesystem::remove_all(dir);
}

TEST(Logging, BadFileIsAnError) {
  LogConfig config;
  config.file = "/proc/stripesolve-cannot-write-here/x.jsonl";
  Status s = set_up_logging(config);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("cannot open log file /proc/stripesolve-cannot-write-here/x.jsonl"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace stripesolve
