// The checker reads the normaliser table (plan/normalizers.h): exp(qk) under
// a row that does not bound the scores diverges and is refused, with the
// row's formula; every other row checks.
#include <gtest/gtest.h>

#include "plan/normalizers.h"
#include "tests/front/helpers.h"

TEST(NormalizersChecker, ExpUnderARowThatDoesNotBoundItIsRefused) {
  for (const auto& row : sink::normalizers()) {
    const std::string text =
        "experiment e extends tiny {\n  attention {\n    score = exp(qk)\n    normalize = " + row.name + "\n  }\n}\n";
    auto c = sink::testing::compile_text(text);
    bool diverges = false;
    for (const auto& d : c->diagnostics().all())
      diverges = diverges || d.message.find("grows without bound") != std::string::npos;
    EXPECT_EQ(diverges, !row.bounds_scores) << row.name << ":\n" << c->diagnostics().render();
    if (row.bounds_scores)
      EXPECT_FALSE(c->diagnostics().has_errors()) << row.name << ":\n" << c->diagnostics().render();
  }
}
