#include "storage/store_config.h"

#include <gtest/gtest.h>

#include "base/config.h"

namespace stripesolve::storage {
namespace {

TEST(StoreConfig, ParsesEveryKey) {
  auto map = ConfigMap::parse(R"(
paths: [/a, /b]
stripe_rows: 1000
round_robin_levels: 8
levels_q: 3
levels_cache: 8GiB
segment_bytes: 64MiB
min_segment_bytes: 256KiB
io_engine: pread
queue_depth: 64
request_bytes: 2MiB
write_request_bytes: 512KiB
direct_io: false
verify_checksums: false
import_buffer: 64MiB
free_space_reserve: 0
)",
                              "store.yaml");
  StoreConfig c;
  parse_store_config(map, c);
  EXPECT_EQ(c.paths, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(c.stripe_rows, 1000);
  EXPECT_EQ(c.round_robin_levels, 8);
  EXPECT_EQ(c.levels_cache, 8 * kGiB);
  EXPECT_EQ(c.segment_bytes, 64 * kMiB);
  EXPECT_EQ(c.io_engine, "pread");
  EXPECT_EQ(c.queue_depth, 64);
  EXPECT_EQ(c.request_bytes, 2 * kMiB);
  EXPECT_EQ(c.write_request_bytes, 512 * kKiB);
  EXPECT_FALSE(c.direct_io);
  EXPECT_FALSE(c.verify_checksums);
  EXPECT_EQ(c.import_buffer, 64 * kMiB);
  EXPECT_EQ(c.free_space_reserve, 0u);
}

TEST(StoreConfig, RejectsBadValues) {
  auto unaligned = ConfigMap::parse("segment_bytes: 1000\n", "store.yaml");
  StoreConfig c;
  EXPECT_THROW(parse_store_config(unaligned, c), ConfigError);
  auto unknown = ConfigMap::parse("pathz: [/a]\n", "store.yaml");
  EXPECT_THROW(parse_store_config(unknown, c), ConfigError);
  auto engine = ConfigMap::parse("io_engine: aio\n", "store.yaml");
  EXPECT_THROW(parse_store_config(engine, c), ConfigError);
}

TEST(StoreConfig, RejectsADirectoryListedTwice) {
  for (const char* again : {"/ssd0/store", "/ssd0/store/", "/ssd0/./store", "/ssd0//store"}) {
    auto map = ConfigMap::parse(std::string("paths: [/ssd0/store, /ssd1/store, ") + again + "]\n",
                                "store.yaml");
    StoreConfig c;
    try {
      parse_store_config(map, c);
      ADD_FAILURE() << again << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("store.yaml:1: paths: entries 0 and 2 ('/ssd0/store' and '") + again +
                    "') name the same directory; list each directory once");
    }
  }
}

}  // namespace
}  // namespace stripesolve::storage
