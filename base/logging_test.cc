#include "base/logging.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

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

std::string format_text(std::string_view payload, spdlog::level::level_enum level, bool journal) {
  spdlog::details::log_msg msg(spdlog::source_loc{}, "scheduler", level,
                               spdlog::string_view_t(payload.data(), payload.size()));
  spdlog::memory_buf_t buf;
  TextLineFormatter(journal).format(msg, buf);
  return std::string(buf.data(), buf.size());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\n', begin);
    out.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

// One line per line of the message, each with the UTC timestamp (with its zone), level, logger
// and job: grep for a job or a time finds every line of a multi-line event.
TEST(TextLineFormatter, EveryLineCarriesTheFullPrefix) {
  LogJobScope job(42);
  const auto lines =
      lines_of(format_text("plan:\n  S = 2048\n  S^m = 4", spdlog::level::info, false));
  ASSERT_EQ(lines.size(), 3u);
  for (const std::string& line : lines) {
    ASSERT_GE(line.size(), 24u) << line;
    EXPECT_EQ(line[10], 'T') << line;
    EXPECT_EQ(line[23], 'Z') << line;  // 2026-11-22T05:01:02.123Z
    EXPECT_NE(line.find(" info  [scheduler] job 42: "), std::string::npos) << line;
  }
  EXPECT_NE(lines[2].find("S^m = 4"), std::string::npos);
}

// Under systemd: the journal's priority prefix, no timestamp of our own.
TEST(TextLineFormatter, JournalLinesCarryThePriority) {
  EXPECT_EQ(format_text("disk full", spdlog::level::err, true), "<3> [scheduler] disk full\n");
  EXPECT_EQ(format_text("a\nb", spdlog::level::warn, true),
            "<4> [scheduler] a\n<4> [scheduler] b\n");
  EXPECT_EQ(format_text("x", spdlog::level::info, true), "<6> [scheduler] x\n");
}

TEST(JsonLineFormatter, NamesTheJobOfItsScope) {
  EXPECT_FALSE(nlohmann::json::parse(format_json("before", spdlog::level::info)).contains("job"));
  {
    LogJobScope outer(7);
    EXPECT_EQ(nlohmann::json::parse(format_json("in 7", spdlog::level::info))["job"], 7);
    {
      LogJobScope inner(8);
      EXPECT_EQ(current_log_job(), 8);
    }
    EXPECT_EQ(current_log_job(), 7);
  }
  EXPECT_EQ(current_log_job(), 0);
  std::thread([] { EXPECT_EQ(current_log_job(), 0); }).join();  // per thread
}

TEST(Logging, WritesJsonFileAndReopens) {
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   ("stripesolve_logging_test_" + std::to_string(::getpid()));
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
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   ("stripesolve_logging_mt_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  LogConfig config;
  config.file = (dir / "mt.jsonl").string();
  config.stderr_format = "off";
  ASSERT_TRUE(set_up_logging(config).is_ok());
  constexpr int kThreads = 4, kLines = 200;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
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

// SIGHUP sets logging up again while jobs log on their own threads: no record may be torn or
// lost, and (under ThreadSanitizer) no logger's sink list may change under a writer.
TEST(Logging, ReconfiguringWhileOthersLog) {
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   ("stripesolve_logging_reload_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  LogConfig config;
  config.file = (dir / "reload.jsonl").string();
  config.stderr_format = "off";
  ASSERT_TRUE(set_up_logging(config).is_ok());
  constexpr int kThreads = 3, kLines = 300;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      auto log = logger("reload" + std::to_string(t));
      for (int i = 0; i < kLines; ++i) log->info("thread {} line {}", t, i);
    });
  }
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(set_up_logging(config).is_ok());
    ASSERT_TRUE(reopen_log_file().is_ok());
  }
  for (auto& th : threads) th.join();
  logger("reload0")->flush();
  std::ifstream in(dir / "reload.jsonl");
  int count = 0;
  for (std::string line; std::getline(in, line); ++count) {
    EXPECT_EQ(nlohmann::json::parse(line)["level"], "info");
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
