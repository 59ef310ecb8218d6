// lockstep diagnose as a library, on real model files: batch-invariant paths agree in every
// bit whatever the packing, chunking, batch and threads; fast vs batch-invariant names a first
// divergence whose inputs really were identical; a one-ULP perturbation of one op is found
// exactly where it was made.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "diagnose/comparison.h"
#include "diagnose/diagnose.h"
#include "gtest/gtest.h"
#include "model/checkpoint.h"
#include "tests/model/random_sequences.h"

namespace lockstep::diagnose {
namespace {

// A tiny Qwen3 model saved once for the whole suite.
class DiagnoseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("diagnose_test_" + std::to_string(getpid())));
    absl::StatusOr<ModelConfig> config = PresetConfig(Architecture::kQwen3, "tiny");
    ASSERT_TRUE(config.ok());
    std::shared_ptr<Transformer> model = CreateRandomModel(*config, /*seed=*/7);
    ASSERT_TRUE(SaveModel(*model, *dir_).ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  // Sequences of the given lengths, prompts of half their length.
  static std::vector<DiagnoseSequence> Sequences(const std::vector<int64_t>& lengths,
                                                 uint64_t seed = 3) {
    std::vector<DiagnoseSequence> out;
    for (auto& tokens : testing::RandomSequences(lengths, 512, seed)) {
      DiagnoseSequence s;
      s.prompt_length = static_cast<int64_t>(tokens.size()) / 2;
      s.tokens = std::move(tokens);
      out.push_back(std::move(s));
    }
    return out;
  }

  static DiagnoseRequest Request(const std::string& a, const std::string& b,
                                 std::vector<DiagnoseSequence> sequences) {
    DiagnoseRequest request;
    request.model_dir = *dir_;
    request.sequences = std::move(sequences);
    PathSettings base_b = DefaultGeneratePath(NumericMode::kBatchInvariant);
    absl::StatusOr<PathSettings> pa = ParsePathSettings(a, PathSettings{});
    absl::StatusOr<PathSettings> pb = ParsePathSettings(b, base_b);
    EXPECT_TRUE(pa.ok()) << pa.status();
    EXPECT_TRUE(pb.ok()) << pb.status();
    request.a = *pa;
    request.b = *pb;
    return request;
  }

  static std::filesystem::path* dir_;
};
std::filesystem::path* DiagnoseTest::dir_ = nullptr;

TEST_F(DiagnoseTest, BatchInvariantPathsAgreeInEveryBitAcrossPackChunkBatchThreads) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"path=train", "path=generate"},
      {"path=train,pack=3,threads=2", "path=generate,chunk=5,batch=4,threads=1"},
      {"path=train,pack=2,threads=1", "path=train,pack=1,threads=2"},
      {"path=generate,chunk=3,batch=2", "path=generate,chunk=64,batch=1,threads=2"},
  };
  for (const auto& [a, b] : cases) {
    SCOPED_TRACE(a + " vs " + b);
    absl::StatusOr<DiagnoseReport> report = Diagnose(Request(a, b, Sequences({12, 21, 9})));
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_TRUE(report->identical);
    EXPECT_EQ(report->tokens_compared, 6 + 11 + 5);
    EXPECT_EQ(report->tokens_differing, 0);
    EXPECT_FALSE(report->first_divergence.has_value());
    EXPECT_EQ(report->vocab.positions, 22);
    EXPECT_EQ(report->vocab.max_kl, 0.0);
    EXPECT_EQ(report->vocab.top1_agreement, 1.0);
    // Every op of every layer was compared (4 layers x 17 + embedding + 3 head ops) at 0 |d|.
    EXPECT_EQ(report->ops.size(), 4u * 17 + 4);
    for (const OpDifference& op : report->ops) {
      EXPECT_GT(op.rows_compared, 0) << OpName(op.op);
      EXPECT_EQ(op.rows_differing, 0) << op.layer << " " << OpName(op.op);
      EXPECT_EQ(op.max_abs_diff, 0.0) << op.layer << " " << OpName(op.op);
    }
  }
}

// Records raw op outputs per (layer, op) of one forward: the test's own oracle, independent of
// OpCapture.
class RawRecorder : public ForwardObserver {
 public:
  void OnOutput(int64_t layer, Op op, const torch::Tensor& output,
                const std::vector<int64_t>* token_rows) override {
    if (token_rows != nullptr) return;  // head ops: not needed here
    outputs[{layer, static_cast<int>(op)}] =
        output.detach().reshape({output.size(0), -1}).clone();
  }
  std::map<std::pair<int64_t, int>, torch::Tensor> outputs;
};

bool SameBits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.numel() * 4) == 0;
}

TEST_F(DiagnoseTest, FastVersusBatchInvariantNamesAnOpWhoseInputsWereIdentical) {
  // 80 tokens: the fast training forward's linears above 64 rows run stock LibTorch.
  DiagnoseRequest request = Request("path=train,mode=fast", "path=train", Sequences({80}));
  absl::StatusOr<DiagnoseReport> report = Diagnose(request);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->identical);
  ASSERT_TRUE(report->first_divergence.has_value());
  const Divergence& d = *report->first_divergence;
  EXPECT_TRUE(d.inputs_identical);
  EXPECT_GE(d.layer, 0);
  EXPECT_GT(d.max_abs_diff, 0.0);
  // A KL is never below 0, also when the two sides differ by float32 rounding only.
  EXPECT_GE(report->vocab.mean_kl, 0.0);
  EXPECT_GE(report->vocab.max_kl, report->vocab.mean_kl);

  // Independently: run both training forwards with a raw recorder and check that the named
  // op's output row differs while the outputs it reads are bit-identical.
  std::map<Op, std::vector<Op>> reads = {
      {Op::kQProj, {Op::kInputNorm}},        {Op::kKProj, {Op::kInputNorm}},
      {Op::kVProj, {Op::kInputNorm}},        {Op::kOProj, {Op::kAttention}},
      {Op::kGateProj, {Op::kPostAttentionNorm}}, {Op::kUpProj, {Op::kPostAttentionNorm}},
      {Op::kDownProj, {Op::kSiluMul}},       {Op::kAttention, {Op::kRopeQ, Op::kRopeK, Op::kVProj}},
      {Op::kQNorm, {Op::kQProj}},            {Op::kKNorm, {Op::kKProj}},
      {Op::kSiluMul, {Op::kGateProj, Op::kUpProj}},
  };
  ASSERT_TRUE(reads.count(d.op)) << "unexpected first op " << OpName(d.op);
  std::map<NumericMode, RawRecorder> recorders;
  const std::vector<int64_t>& tokens = request.sequences[0].tokens;
  for (NumericMode mode : {NumericMode::kFast, NumericMode::kBatchInvariant}) {
    ModelOptions options;
    options.numeric_mode = mode;
    absl::StatusOr<std::shared_ptr<Transformer>> model = LoadModel(*dir_, options);
    ASSERT_TRUE(model.ok());
    absl::StatusOr<PackedBatch> batch = PackSequences({tokens});
    ASSERT_TRUE(batch.ok());
    ASSERT_TRUE((*model)->Hidden(*batch, TrainingAttention{}, &recorders[mode]).ok());
  }
  const auto out = [&](NumericMode mode, Op op) {
    return recorders[mode].outputs.at({d.layer, static_cast<int>(op)});
  };
  const int64_t t = d.position;
  EXPECT_FALSE(SameBits(out(NumericMode::kFast, d.op)[t], out(NumericMode::kBatchInvariant, d.op)[t]));
  for (Op input : reads[d.op]) {
    // Attention reads keys and values of positions 0..t; the others read row t.
    const bool all_earlier = d.op == Op::kAttention && input != Op::kRopeQ;
    const int64_t begin = all_earlier ? 0 : t;
    EXPECT_TRUE(SameBits(out(NumericMode::kFast, input).narrow(0, begin, t - begin + 1),
                         out(NumericMode::kBatchInvariant, input).narrow(0, begin, t - begin + 1)))
        << OpName(input) << " differs at the named op";
  }
}

// Adds one ULP to element 3 of (layer, op)'s output row at (sequence, position).
class OneUlp : public OutputHook {
 public:
  OneUlp(int64_t layer, Op op, int64_t sequence, int64_t position)
      : layer_(layer), op_(op), sequence_(sequence), position_(position) {}
  void OnOutput(int64_t layer, Op op, const torch::Tensor& rows,
                const std::vector<RowKey>& keys) override {
    if (layer != layer_ || op != op_) return;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i].sequence == sequence_ && keys[i].position == position_) {
        float* value = rows[static_cast<int64_t>(i)].data_ptr<float>() + 3;
        *value = std::nextafter(*value, INFINITY);
        ++applied;
      }
    }
  }
  int applied = 0;

 private:
  int64_t layer_;
  Op op_;
  int64_t sequence_, position_;
};

TEST_F(DiagnoseTest, OneUlpInOneOpIsNamedExactlyAndEarlierPositionsAreIdentical) {
  struct Case {
    int64_t layer;
    Op op;
    int64_t position;  // the prompt is positions 0..9: 4 is in the prefill, 13 a decode step
  };
  for (const Case& c : {Case{1, Op::kDownProj, 13}, Case{2, Op::kRopeK, 4},
                        Case{0, Op::kInputNorm, 11}}) {
    SCOPED_TRACE(std::string(OpName(c.op)) + " at " + std::to_string(c.position));
    OneUlp perturb(c.layer, c.op, /*sequence=*/1, c.position);
    DiagnoseRequest request =
        Request("path=train,pack=2", "path=generate,batch=2", Sequences({16, 20}));
    request.perturb_b = &perturb;
    absl::StatusOr<DiagnoseReport> report = Diagnose(request);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(perturb.applied, 1);
    EXPECT_FALSE(report->identical);
    ASSERT_TRUE(report->first_divergence.has_value());
    const Divergence& d = *report->first_divergence;
    EXPECT_EQ(d.sequence, 1);
    EXPECT_EQ(d.position, c.position);
    EXPECT_EQ(d.layer, c.layer);
    EXPECT_EQ(d.op, c.op);
    EXPECT_TRUE(d.inputs_identical);
    // Sequence 0 was untouched; sequence 1 is identical before the position.
    EXPECT_FALSE(report->sequences[0].first_differing_position.has_value());
    EXPECT_EQ(report->sequences[0].tokens_differing, 0);
    ASSERT_TRUE(report->sequences[1].first_differing_position.has_value());
    EXPECT_EQ(*report->sequences[1].first_differing_position, c.position);
    const SequenceResult& s = report->sequences[1];
    for (int64_t j = 0; j + s.prompt_length - 1 < c.position; ++j) {
      EXPECT_EQ(std::memcmp(&s.logprobs_a[j], &s.logprobs_b[j], 4), 0) << "token " << j;
    }
  }
}

TEST_F(DiagnoseTest, BadInputIsNamed) {
  DiagnoseRequest request = Request("path=train", "path=generate", Sequences({8}));
  request.sequences[0].tokens[5] = 512;
  absl::StatusOr<DiagnoseReport> report = Diagnose(request);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("token id 512"), std::string::npos) << report.status();

  request = Request("path=train", "path=generate", Sequences({8}));
  request.sequences[0].prompt_length = 8;
  report = Diagnose(request);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("prompt length 8"), std::string::npos);

  EXPECT_FALSE(ParsePathSettings("path=train,colour=red", {}).ok());
  EXPECT_NE(ParsePathSettings("colour=red", {}).status().message().find("'colour'"),
            std::string::npos);
  EXPECT_FALSE(ParsePathSettings("path=train,batch=2", {}).ok());
  EXPECT_FALSE(ParsePathSettings("mode=batch_invariant,dtype=bfloat16", {}).ok());
  EXPECT_FALSE(ParsePathSettings("pack=0", {}).ok());
}

TEST(DiagnoseDataflowTest, EveryInputOfEveryOpComesEarlierInExecutionOrder) {
  for (bool qk_norm : {true, false}) {
    const auto order = ExecutionOrder(3, qk_norm);
    std::map<std::pair<int64_t, int>, size_t> rank;
    for (size_t i = 0; i < order.size(); ++i) {
      rank[{order[i].first, static_cast<int>(order[i].second)}] = i;
    }
    for (size_t i = 0; i < order.size(); ++i) {
      for (const OpInput& in : InputsOf(order[i].first, order[i].second, 3, qk_norm)) {
        auto it = rank.find({in.layer, static_cast<int>(in.op)});
        ASSERT_NE(it, rank.end()) << OpName(in.op);
        EXPECT_LT(it->second, i) << OpName(order[i].second) << " reads " << OpName(in.op);
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::diagnose
