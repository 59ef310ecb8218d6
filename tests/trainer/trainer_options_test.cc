#include "trainer/trainer_options.h"

#include "gtest/gtest.h"

namespace lockstep::trainer {
namespace {

TEST(TrainerOptionsTest, ReadsFlatAndSectionedKeys) {
  absl::StatusOr<TrainerOptions> o = TrainerOptionsFromJson(R"({
    "mode": "batch_invariant", "lr": 0.001,
    "optimizer": {"betas": [0.8, 0.95], "weight_decay": 0.1, "grad_clip": 0.5},
    "lr_schedule": {"schedule": "cosine", "warmup_steps": 3, "total_steps": 30},
    "loss": {"loss": "gspo", "clip_eps_high": 0.28, "aggregation": "seq_mean_token_mean",
             "tis_cap": 2.0, "kl_coef": 0.01,
             "moe_aux_loss_coef": 0.02, "moe_z_loss_coef": 0.003},
    "micro_batch_tokens": 2048, "checkpoint": {"checkpoint_dir": "/tmp/x", "keep_last": 2}})");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->mode, NumericMode::kBatchInvariant);
  EXPECT_DOUBLE_EQ(o->lr, 0.001);
  EXPECT_DOUBLE_EQ(o->beta1, 0.8);
  EXPECT_DOUBLE_EQ(o->beta2, 0.95);
  EXPECT_EQ(o->schedule, ScheduleKind::kCosine);
  EXPECT_EQ(o->loss, LossKind::kGspo);
  EXPECT_EQ(o->aggregation, Aggregation::kSeqMeanTokenMean);
  EXPECT_DOUBLE_EQ(o->clip_eps_high, 0.28);
  EXPECT_DOUBLE_EQ(o->moe_aux_loss_coef, 0.02);
  EXPECT_DOUBLE_EQ(o->moe_z_loss_coef, 0.003);
  EXPECT_EQ(o->micro_batch_tokens, 2048);
  EXPECT_EQ(o->checkpoint_dir, "/tmp/x");
  EXPECT_EQ(o->keep_last, 2);
  // The JSON form reads back to the same options.
  absl::StatusOr<TrainerOptions> again = TrainerOptionsFromJson(TrainerOptionsToJson(*o));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(TrainerOptionsToJson(*again), TrainerOptionsToJson(*o));
}

TEST(TrainerOptionsTest, ErrorsNameTheKey) {
  absl::Status unknown = TrainerOptionsFromJson(R"({"loss": {"clip_eps_hihg": 0.3}})").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("loss.clip_eps_hihg"), std::string::npos) << unknown;
  absl::Status type = TrainerOptionsFromJson(R"({"lr": "fast"})").status();
  EXPECT_NE(type.message().find("lr"), std::string::npos) << type;
  absl::Status range = TrainerOptionsFromJson(R"({"micro_batch_tokens": 0})").status();
  EXPECT_NE(range.message().find("micro_batch_tokens"), std::string::npos) << range;
  absl::Status name = TrainerOptionsFromJson(R"({"aggregation": "sum"})").status();
  EXPECT_NE(name.message().find("aggregation"), std::string::npos) << name;
  absl::Status cosine = TrainerOptionsFromJson(R"({"schedule": "cosine"})").status();
  EXPECT_NE(cosine.message().find("total_steps"), std::string::npos) << cosine;
  EXPECT_FALSE(TrainerOptionsFromJson("[1]").ok());
  EXPECT_FALSE(TrainerOptionsFromJson("{").ok());
}

}  // namespace
}  // namespace lockstep::trainer
