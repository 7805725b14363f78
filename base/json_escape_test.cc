#include "base/json_escape.h"

#include <gtest/gtest.h>

namespace stripesolve {
namespace {

TEST(JsonEscape, PlainTextUnchanged) {
  EXPECT_EQ(json_escape("stripe 3 of 17 done"), "stripe 3 of 17 done");
}

TEST(JsonEscape, QuotesAndBackslashes) {
  EXPECT_EQ(json_escape(R"(path "C:\x")"), R"(path \"C:\\x\")");
}

TEST(JsonEscape, ControlCharacters) {
  EXPECT_EQ(json_escape("a\nb\tc\rd\be\ff"), "a\\nb\\tc\\rd\\be\\ff");
  EXPECT_EQ(json_escape(std::string_view("\x01\x1f\x7f", 3)), "\\u0001\\u001f\\u007f");
  EXPECT_EQ(json_escape(std::string_view("nul\0byte", 8)), "nul\\u0000byte");
}

TEST(JsonEscape, ValidUtf8Kept) {
  EXPECT_EQ(json_escape("résidu ‖x‖ 𝜀"), "résidu ‖x‖ 𝜀");
}

TEST(JsonEscape, InvalidUtf8Replaced) {
  // Lone continuation byte, truncated sequence, overlong '/', UTF-16 surrogate.
  EXPECT_EQ(json_escape("a\x80z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(json_escape("a\xE2\x80"), "a\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(json_escape("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(json_escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace stripesolve
