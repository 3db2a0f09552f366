// api::check_model_context: a response too long for the model's context is refused on
// spec.algorithm.maxResponseTokens with the real numbers, never a negative prompt budget.
#include <gtest/gtest.h>

#include "api/validate.h"

namespace tlt::api {
namespace {

TEST(ModelContext, RoomForAPromptPasses) {
  AlgorithmSpec a;
  a.max_response_tokens = 8192 - kDraftHeadroom - 1;  // one position left for the prompt
  FieldErrors errors;
  check_model_context(a, 8192, "spec.model.path m.gguf", &errors);
  EXPECT_TRUE(errors.empty()) << errors[0].to_string();
}

TEST(ModelContext, ALongerResponseGivesTheNumbers) {
  AlgorithmSpec a;
  a.max_response_tokens = 8320;  // the trial's "-192 tokens the model's context leaves"
  FieldErrors errors;
  check_model_context(a, 8192, "spec.model.path m.gguf", &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].to_string(),
            "spec.algorithm.maxResponseTokens: 8320 tokens of response and 64 of drafting "
            "headroom leave no room for a prompt in the 8192-token context of spec.model.path "
            "m.gguf; set it below 8128, leaving room for the longest prompt");
}

TEST(ModelContext, AContextTooShortForAnyResponse) {
  AlgorithmSpec a;
  a.max_response_tokens = 1;
  FieldErrors errors;
  check_model_context(a, 64, "preset micro", &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("use a model of longer context"), std::string::npos)
      << errors[0].message;
}

TEST(FormatSeconds, AsPeopleWriteThem) {
  EXPECT_EQ(format_seconds(30), "30 s");
  EXPECT_EQ(format_seconds(1.5), "1.5 s");
  EXPECT_EQ(format_seconds(0.25), "0.25 s");
}

}  // namespace
}  // namespace tlt::api
