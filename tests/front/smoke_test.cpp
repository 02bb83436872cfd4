#include <gtest/gtest.h>

#include "helpers.h"

TEST(Smoke, PresetCompiles) {
  auto c = sink::testing::compile_text("experiment a extends tiny {}");
  ASSERT_FALSE(c->diagnostics().has_errors()) << c->diagnostics().render();
  ASSERT_EQ(c->plans().size(), 1u);
  EXPECT_EQ(c->plans()[0].integer("model.d"), 64);
}
