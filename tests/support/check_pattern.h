// A tiny FileCheck for tests of printed IR. Each non-empty line of the patterns is one of
//
//   CHECK: <substring>       must appear after the end of the previous CHECK's match
//   CHECK-NOT: <substring>   must not appear between the previous CHECK's match and the next
//                            one's (or the end of the text when no CHECK follows)
//
// Leading and trailing blanks of a pattern line and of its substring are ignored.
//
//   EXPECT_TRUE(matches_checks(print_kernel(k), R"(
//     CHECK: kernel k [4, 8]
//     CHECK: load b0[8, 1]
//     CHECK-NOT: reduce
//     CHECK: store b1[8, 1]
//   )"));
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace kiln {

namespace check_pattern_detail {

struct Directive {
  bool negative;
  std::string needle;
  int line;  // 1-based line in the patterns
};

inline std::string_view trim(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && blank(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && blank(s.back()))
    s.remove_suffix(1);
  return s;
}

inline std::string with_failure(const std::string& why, const std::string& text,
                                const std::string& patterns) {
  return why + "\n--- patterns ---\n" + patterns + "\n--- text ---\n" + text;
}

}  // namespace check_pattern_detail

/// Checks `text` against `patterns` (see above); the failure message names the pattern that did
/// not hold and shows both the patterns and the text.
inline ::testing::AssertionResult matches_checks(const std::string& text,
                                                 const std::string& patterns) {
  using check_pattern_detail::Directive;
  using check_pattern_detail::trim;
  using check_pattern_detail::with_failure;

  std::vector<Directive> directives;
  int line_number = 0;
  size_t start = 0;
  while (start <= patterns.size()) {
    size_t end = patterns.find('\n', start);
    if (end == std::string::npos) end = patterns.size();
    ++line_number;
    const std::string_view line = trim(std::string_view(patterns).substr(start, end - start));
    start = end + 1;
    if (line.empty()) continue;
    constexpr std::string_view kCheck = "CHECK:";
    constexpr std::string_view kCheckNot = "CHECK-NOT:";
    bool negative;
    std::string_view needle;
    if (line.starts_with(kCheck)) {
      negative = false;
      needle = trim(line.substr(kCheck.size()));
    } else if (line.starts_with(kCheckNot)) {
      negative = true;
      needle = trim(line.substr(kCheckNot.size()));
    } else {
      return ::testing::AssertionFailure() << with_failure(
                 "pattern line " + std::to_string(line_number) +
                     " is neither 'CHECK:' nor 'CHECK-NOT:': '" + std::string(line) + "'",
                 text, patterns);
    }
    if (needle.empty()) {
      return ::testing::AssertionFailure()
             << with_failure("pattern line " + std::to_string(line_number) + " has no substring",
                             text, patterns);
    }
    directives.push_back({negative, std::string(needle), line_number});
  }
  if (directives.empty()) {
    return ::testing::AssertionFailure()
           << with_failure("no CHECK lines in the patterns", text, patterns);
  }

  size_t position = 0;  // just past the previous CHECK's match
  std::vector<const Directive*> pending_nots;
  // Every pending CHECK-NOT must be absent from text[position, limit).
  auto check_nots = [&](size_t limit) -> ::testing::AssertionResult {
    const std::string_view range = std::string_view(text).substr(position, limit - position);
    for (const Directive* d : pending_nots) {
      if (range.find(d->needle) != std::string_view::npos) {
        return ::testing::AssertionFailure()
               << with_failure("CHECK-NOT on pattern line " + std::to_string(d->line) +
                                   " failed: found '" + d->needle + "'",
                               text, patterns);
      }
    }
    pending_nots.clear();
    return ::testing::AssertionSuccess();
  };
  for (const Directive& d : directives) {
    if (d.negative) {
      pending_nots.push_back(&d);
      continue;
    }
    const size_t found = text.find(d.needle, position);
    if (found == std::string::npos) {
      return ::testing::AssertionFailure()
             << with_failure("CHECK on pattern line " + std::to_string(d.line) + " failed: '" +
                                 d.needle + "' not found after offset " + std::to_string(position),
                             text, patterns);
    }
    if (auto r = check_nots(found); !r) return r;
    position = found + d.needle.size();
  }
  if (auto r = check_nots(text.size()); !r) return r;
  return ::testing::AssertionSuccess();
}

}  // namespace kiln
