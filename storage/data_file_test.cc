// read_whole_file and read_whole_file_prefix: whole files, the size bound and its message,
// prefixes of longer and shorter files, and a missing file.
#include "storage/data_file.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace stripesolve::storage {
namespace {

std::string temp_file(const std::string& content) {
  char tmpl[] = "/tmp/ss-data-file-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  ::close(fd);
  std::ofstream(tmpl, std::ios::binary) << content;
  return tmpl;
}

TEST(ReadWholeFile, ReadsUpToItsBoundAndNamesTheFileBeyondIt) {
  std::string content(200000, 'a');  // several 64 KiB steps
  for (size_t k = 0; k < content.size(); ++k) content[k] = static_cast<char>('a' + k % 26);
  const std::string path = temp_file(content);
  auto whole = read_whole_file(path, content.size());
  ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
  EXPECT_EQ(*whole, content);
  auto over = read_whole_file(path, content.size() - 1);
  ASSERT_FALSE(over.is_ok());
  EXPECT_EQ(over.status().message(), path + " is larger than 199999 bytes");
  auto prefix = read_whole_file_prefix(path, 70000);
  ASSERT_TRUE(prefix.is_ok());
  EXPECT_EQ(*prefix, content.substr(0, 70000));
  auto all = read_whole_file_prefix(path, 1 << 20);
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ(*all, content);
  ::unlink(path.c_str());
  auto missing = read_whole_file(path, 10);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("open " + path), std::string::npos)
      << missing.status().to_string();
}

TEST(ReadWholeFile, EmptyFile) {
  const std::string path = temp_file("");
  auto whole = read_whole_file(path, 0);
  ASSERT_TRUE(whole.is_ok());
  EXPECT_TRUE(whole->empty());
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace stripesolve::storage
