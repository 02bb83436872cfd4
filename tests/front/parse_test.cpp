#include <gtest/gtest.h>
#include "compiler/pipeline.h"
TEST(Parse, Smoke) { sink::Compilation c({}); c.add_text("x.sink", "experiment a extends tiny {}"); c.run(); EXPECT_FALSE(c.diagnostics().has_errors()) << c.diagnostics().render(); }
