#include "base/config.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "base/logging.h"
#include "base/units.h"

namespace stripesolve {
namespace {

// A config struct of the shape modules use, with its documented defaults.
struct CacheLike {
  uint64_t ram_budget = 8 * kGiB;
  int64_t io_threads = 4;
  double fraction = 0.5;
  bool pinned = true;
  std::vector<std::string> paths = {"/tmp/a"};
  std::string mode = "auto";
  std::vector<int64_t> lanes;
};

struct Whole {
  LogConfig log;
  CacheLike cache;
};

void parse_cache(ConfigMap& map, CacheLike& c) {
  map.get_bytes("ram_budget", c.ram_budget, 64 * kMiB);
  map.get("io_threads", c.io_threads, 1, 64);
  map.get("fraction", c.fraction, 0.0, 1.0);
  map.get("pinned", c.pinned);
  map.get("paths", c.paths);
  map.get_choice("mode", c.mode, {"auto", "pinned", "pageable"});
  map.get("lanes", c.lanes, 0, 63);
  map.finish();
}

Whole parse(std::string_view text) {
  Whole w;
  ConfigMap root = ConfigMap::parse(text, "test.yaml");
  auto log = root.section("log");
  parse_log_config(log, w.log);
  auto cache = root.section("cache");
  parse_cache(cache, w.cache);
  root.finish();
  return w;
}

std::string error_of(std::string_view text) {
  try {
    parse(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Config, EmptyDocumentGivesDefaults) {
  Whole w = parse("");
  EXPECT_EQ(w.log.level, "info");
  EXPECT_EQ(w.log.file, "");
  EXPECT_EQ(w.cache.ram_budget, 8 * kGiB);
  EXPECT_EQ(w.cache.io_threads, 4);
  EXPECT_EQ(w.cache.paths, std::vector<std::string>{"/tmp/a"});
  EXPECT_TRUE(w.cache.pinned);
}

TEST(Config, ReadsEveryType) {
  Whole w = parse(R"(
log:
  level: debug
  file: /var/log/s.jsonl
cache:
  ram_budget: 96GiB
  io_threads: 8
  fraction: 0.25
  pinned: false
  paths: [/ssd0, /ssd1]
  mode: pageable
  lanes: [2, 0]
)");
  EXPECT_EQ(w.log.level, "debug");
  EXPECT_EQ(w.log.file, "/var/log/s.jsonl");
  EXPECT_EQ(w.cache.ram_budget, 96 * kGiB);
  EXPECT_EQ(w.cache.io_threads, 8);
  EXPECT_DOUBLE_EQ(w.cache.fraction, 0.25);
  EXPECT_FALSE(w.cache.pinned);
  EXPECT_EQ(w.cache.paths, (std::vector<std::string>{"/ssd0", "/ssd1"}));
  EXPECT_EQ(w.cache.mode, "pageable");
  EXPECT_EQ(w.cache.lanes, (std::vector<int64_t>{2, 0}));
}

TEST(Config, NullValueKeepsDefault) {
  Whole w = parse("cache:\n  io_threads:\n  ram_budget: ~\n");
  EXPECT_EQ(w.cache.io_threads, 4);
  EXPECT_EQ(w.cache.ram_budget, 8 * kGiB);
}

TEST(Config, UnknownKeyNamesPathAndLine) {
  EXPECT_EQ(error_of("log:\n  level: info\ncache:\n  io_threads: 2\n  ram_budgt: 1GiB\n"),
            "test.yaml:5: cache.ram_budgt: unknown key (expected one of: fraction, io_threads, "
            "lanes, mode, paths, pinned, ram_budget)");
  EXPECT_EQ(error_of("logging:\n  level: info\n"),
            "test.yaml:1: logging: unknown key (expected one of: cache, log)");
}

TEST(Config, WrongTypeNamesPathAndLine) {
  EXPECT_EQ(error_of("cache:\n  io_threads: many\n"),
            "test.yaml:2: cache.io_threads: expected an integer, got 'many'");
  EXPECT_EQ(error_of("cache:\n\n  pinned: maybe\n"),
            "test.yaml:3: cache.pinned: expected true or false, got 'maybe'");
  EXPECT_EQ(error_of("cache:\n  ram_budget: lots\n"),
            "test.yaml:2: cache.ram_budget: expected a byte size such as 64GiB, got 'lots'");
  EXPECT_EQ(error_of("cache:\n  paths: /ssd0\n"),
            "test.yaml:2: cache.paths: expected a sequence of strings, got '/ssd0'");
  EXPECT_EQ(error_of("cache:\n  paths:\n    - /ssd0\n    - [a, b]\n"),
            "test.yaml:4: cache.paths[1]: expected a string, got a sequence");
  EXPECT_EQ(error_of("cache: 3\n"), "test.yaml:1: cache: expected a mapping, got '3'");
  EXPECT_EQ(error_of("cache:\n  fraction: half\n"),
            "test.yaml:2: cache.fraction: expected a number, got 'half'");
}

TEST(Config, IntegerSequencesNameTheBadItem) {
  EXPECT_EQ(error_of("cache:\n  lanes: 1\n"),
            "test.yaml:2: cache.lanes: expected a sequence of integers such as [0, 2], got '1'");
  EXPECT_EQ(error_of("cache:\n  lanes: [0, one]\n"),
            "test.yaml:2: cache.lanes[1]: expected an integer, got 'one'");
  EXPECT_EQ(error_of("cache:\n  lanes:\n    - 0\n    - 64\n"),
            "test.yaml:4: cache.lanes[1]: 64 is out of range [0, 63]");
  EXPECT_EQ(error_of("cache:\n  lanes: [1, 3, 1]\n"),
            "test.yaml:2: cache.lanes[2]: 1 is listed twice");
  EXPECT_TRUE(parse("cache:\n  lanes: []\n").cache.lanes.empty());
}

TEST(Config, OutOfRangeNamesPathAndLine) {
  EXPECT_EQ(error_of("cache:\n  io_threads: 0\n"),
            "test.yaml:2: cache.io_threads: 0 is out of range [1, 64]");
  EXPECT_EQ(error_of("cache:\n  fraction: 1.5\n"),
            "test.yaml:2: cache.fraction: 1.5 is out of range [0, 1]");
  EXPECT_EQ(error_of("cache:\n  ram_budget: 1MiB\n"),
            "test.yaml:2: cache.ram_budget: 1MiB is out of range [64.00 MiB, 16.00 EiB]");
  EXPECT_EQ(error_of("log:\n  level: loud\n"),
            "test.yaml:2: log.level: 'loud' is not one of trace, debug, info, warn, error, "
            "critical, off");
}

TEST(Config, DuplicateKeyNamesKeyAndBothLines) {
  EXPECT_EQ(error_of("cache:\n  io_threads: 2\n  ram_budget: 1GiB\n  io_threads: 4\n"),
            "test.yaml:4: cache.io_threads: duplicate key (also set at line 2); set each key once");
  EXPECT_EQ(error_of("log:\n  level: info\ncache:\n  io_threads: 2\nlog:\n  level: debug\n"),
            "test.yaml:5: log: duplicate key (also set at line 1); set each key once");
  // Inside a sequence, too.
  EXPECT_EQ(error_of("cache:\n  paths:\n    - {a: 1, a: 2}\n"),
            "test.yaml:3: cache.paths[0].a: duplicate key (also set at line 3); set each key once");
}

TEST(Config, SyntaxErrorNamesLine) {
  EXPECT_EQ(error_of("cache:\n  paths: [a, b\n"),
            "test.yaml:3: YAML syntax error: end of sequence flow not found");
}

TEST(Config, RootMustBeMapping) {
  EXPECT_EQ(error_of("- a\n- b\n"),
            "test.yaml:1: the document must be a mapping of sections, got a sequence");
}

TEST(Config, LoadFile) {
  const std::string path =
      ::testing::TempDir() + "/stripesolve_config_test_" + std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream out(path);
    out << "log:\n  level: warn\n";
  }
  ConfigMap root = ConfigMap::load_file(path);
  LogConfig log;
  auto section = root.section("log");
  parse_log_config(section, log);
  root.finish();
  EXPECT_EQ(log.level, "warn");
  std::remove(path.c_str());

  try {
    ConfigMap::load_file("/nonexistent/stripesolved.yaml");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/stripesolved.yaml: cannot open the configuration file");
  }
}

}  // namespace
}  // namespace stripesolve
