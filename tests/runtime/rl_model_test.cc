// An RL policy from spec.model.path: the model's own tokenizer behind the RL Codec interface
// (runtime/rl/model_codec.h) on the tiny random llama of tests/models/fixtures (a ChatML template,
// <|im_end|> and <|endoftext|> as end tokens), the ASCII codec unchanged behind the same
// interface, greedy rollouts of the pretrained policy equal with speculation on and off (with an
// untrained drafter and one warm-started on the model's generations), and that warm start: it
// lowers the drafter's loss on held-out generations, is cached, and refuses a corrupt cache file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>

#include "runtime/drafter/buffer.h"
#include "runtime/drafter/trainer.h"
#include "runtime/model/drafter.h"
#include "runtime/model/model_source.h"
#include "runtime/model/precision.h"
#include "runtime/model/pretrained.h"
#include "runtime/rl/drafter_on_generations.h"
#include "runtime/rl/evaluation.h"
#include "runtime/rl/grpo.h"
#include "runtime/rl/model_codec.h"
#include "runtime/rl/sequences.h"
#include "runtime/rl/tasks.h"
#include "runtime/rollout/engine.h"
#include "tests/runtime/model_fixtures.h"

namespace tlt::rl {
namespace {

const std::string kLlama = testing::kModelFixtures + "/tiny-llama-hf";

std::unique_ptr<ModelCodec> llama_codec() {
  StatusOr<model::ModelSource> source = model::resolve_model_source(kLlama, "auto");
  EXPECT_TRUE(source.ok()) << source.status().message();
  StatusOr<std::unique_ptr<ModelCodec>> codec = ModelCodec::load(*source, 64);
  EXPECT_TRUE(codec.ok()) << codec.status().message();
  return std::move(*codec);
}

std::unique_ptr<Task> arithmetic() {
  StatusOr<std::unique_ptr<Task>> task = make_task("arithmetic-cot", 1);
  return std::move(*task);
}

TEST(RlCodec, AsciiCodecIsTheTextCodec) {
  const Codec& c = ascii_codec();
  EXPECT_EQ(*c.encode("7 + 5 = 12\xc3\xa9"), encode_text("7 + 5 = 12\xc3\xa9"));
  EXPECT_EQ(*c.encode_prompt("Compute: 1 + 2\n", "ignored"), encode_text("Compute: 1 + 2\n"));
  EXPECT_EQ(*c.decode({int64_t('4'), int64_t('2'), kEndOfText, int64_t('9')}), "42");
  EXPECT_EQ(c.end_ids(), std::vector<int64_t>{kEndOfText});
  EXPECT_EQ(c.vocab_size(), kTextVocab);
  EXPECT_FALSE(c.has_chat());
}

TEST(RlCodec, ModelCodecRendersTheChatTemplateAndStopsOnEndTokens) {
  std::unique_ptr<ModelCodec> codec = llama_codec();
  ASSERT_TRUE(codec);
  EXPECT_TRUE(codec->has_chat());
  EXPECT_EQ(codec->vocab_size(), 64);
  const std::vector<int64_t>& ends = codec->end_ids();
  EXPECT_NE(std::find(ends.begin(), ends.end(), 1), ends.end()) << "<|im_end|> is id 1";
  // The chat rendering wraps the user turn: <|im_end|> (id 1) closes it.
  std::vector<int64_t> chat = *codec->encode_prompt("1+2=", "3*4=");
  std::vector<int64_t> user = *codec->encode("3*4=");
  EXPECT_GT(chat.size(), user.size());
  EXPECT_NE(std::find(chat.begin(), chat.end(), 1), chat.end());
  EXPECT_NE(std::search(chat.begin(), chat.end(), user.begin(), user.end()), chat.end());
  // '3' '+' '4' then <|im_end|>: the response ends there.
  std::vector<int64_t> ids = *codec->encode("3+4");
  ids.push_back(1);
  ids.push_back(20);
  EXPECT_EQ(*codec->decode(ids), "3+4");
  EXPECT_FALSE(codec->decode({64}).ok()) << "an id outside the model's vocabulary";
}

// A dataset's message list renders through the template as it is: one user turn as
// encode_prompt's, a system turn of its own in place of the template's default.
TEST(RlCodec, ModelCodecRendersMessageLists) {
  std::unique_ptr<ModelCodec> codec = llama_codec();
  ASSERT_TRUE(codec);
  EXPECT_EQ(*codec->encode_messages({{"user", "3*4="}}), *codec->encode_prompt("1+2=", "3*4="));
  std::vector<int64_t> with_system = *codec->encode_messages({{"system", "1+1"}, {"user", "3*4="}});
  std::vector<int64_t> system = *codec->encode("1+1");
  EXPECT_NE(std::search(with_system.begin(), with_system.end(), system.begin(), system.end()),
            with_system.end());
  EXPECT_NE(with_system, *codec->encode_prompt("1+2=", "3*4="));
  // Without a template (the ASCII codec) the contents are joined.
  EXPECT_EQ(*ascii_codec().encode_messages({{"system", "a"}, {"user", "b"}}), encode_text("a\nb"));
}

TEST(RlCodec, TasksAskChatModelsForTheAnswerLine) {
  std::unique_ptr<Task> task = arithmetic();
  Problem p = task->problem(0, false);
  EXPECT_EQ(task->chat_prompt(p).rfind(p.prompt, 0), 0u);
  EXPECT_NE(task->chat_prompt(p).find("Answer:"), std::string::npos);
  EXPECT_EQ(*prompt_ids(ascii_codec(), *task, p), encode_text(p.prompt));
}

// A small warm start on the tiny llama: 12 problems answered (24 tokens each), 16-token vocabulary.
GenerationsWarmStartOptions small_warm_start(const Codec* codec) {
  GenerationsWarmStartOptions o;
  o.steps = 60, o.batch = 8, o.learning_rate = 3e-3, o.seed = 3;
  o.prompts = 12, o.max_new_tokens = 24, o.generation_batch = 6, o.vocab_subset = 16;
  o.max_seq = 128, o.codec = codec;
  return o;
}

// Greedy completions of held-out problems, plain or speculative with `drafter`.
std::vector<rollout::Completion> greedy_rollouts(model::Transformer target, model::Drafter drafter,
                                                 const Codec& codec, const Task& task,
                                                 bool speculative, rollout::EngineStats* stats) {
  TaskRequestOptions ro;
  ro.max_new_tokens = 24, ro.temperature = 0, ro.max_seq = 128, ro.headroom = 32;
  StatusOr<std::vector<rollout::Request>> reqs = task_requests(task, codec, 0, 6, true, ro);
  EXPECT_TRUE(reqs.ok()) << reqs.status().message();
  torch::NoGradGuard no_grad;
  rollout::EngineOptions eo;
  eo.max_batch = 6, eo.max_seq = 128, eo.speculative = speculative;
  // One fixed drafter arm at every step: what is accepted then depends on the drafter alone, not
  // on which arms a timing-driven bandit happened to pick.
  eo.activation_threshold = 6, eo.arms = {"4_1_5"}, eo.selector = "fixed", eo.plain_arm = false;
  auto engine = rollout::Engine::create(target, drafter, eo);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  auto out = (*engine)->generate(*reqs);
  EXPECT_TRUE(out.ok()) << out.status().message();
  *stats = (*engine)->stats();
  return *out;
}

TEST(RlFromModel, GreedySpeculationEqualsPlainDecoding) {
  StatusOr<model::PretrainedModel> m = model::load_pretrained(kLlama);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::unique_ptr<ModelCodec> codec = llama_codec();
  ASSERT_TRUE(codec);
  std::unique_ptr<Task> task = arithmetic();
  torch::manual_seed(5);
  model::Drafter untrained(m->model, 1);
  ASSERT_TRUE(untrained->set_draft_vocab(torch::arange(16, torch::kInt64)).ok());  // vocabSubset
  torch::manual_seed(5);
  model::Drafter warmed(m->model, 1);
  StatusOr<GenerationsWarmStart> w =
      drafter_warm_start_on_generations(m->model, warmed, *task, small_warm_start(codec.get()));
  ASSERT_TRUE(w.ok()) << w.status().message();
  rollout::EngineStats plain_stats;
  std::vector<rollout::Completion> plain =
      greedy_rollouts(m->model, untrained, *codec, *task, false, &plain_stats);
  std::vector<int64_t> accepted;
  for (model::Drafter d : {untrained, warmed}) {
    rollout::EngineStats spec_stats;
    std::vector<rollout::Completion> spec =
        greedy_rollouts(m->model, d, *codec, *task, true, &spec_stats);
    ASSERT_EQ(plain.size(), spec.size());
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i].tokens, spec[i].tokens) << i;
    std::cout << (d.ptr() == warmed.ptr() ? "warmed" : "untrained")
              << " drafter: speculative steps " << spec_stats.spec_steps << ", accepted "
              << spec_stats.accepted << " of " << spec_stats.drafted << " drafted, accept length "
              << spec_stats.accept_length() << "\n";
    EXPECT_GT(spec_stats.spec_steps, 0);
    accepted.push_back(spec_stats.accepted);
  }
  // Greedy rollouts through one fixed arm: the warmed drafter accepted 28 of 351 drafted tokens
  // where the untrained one accepted 9 of 417 (2026-12-04); the check asks for 1.5 times as many.
  EXPECT_GT(2 * accepted[1], 3 * accepted[0]) << "the warm start should raise acceptance";
}

// The drafter loss (drafter::drafter_loss) over 32 windows of the model's sampled answers to
// held-out problems.
double held_out_drafter_loss(model::Transformer target, model::Drafter drafter, const Codec& codec,
                             const Task& task) {
  TaskRequestOptions ro;
  ro.max_new_tokens = 24, ro.temperature = 1.0, ro.seed = 77, ro.max_seq = 128, ro.headroom = 8;
  StatusOr<std::vector<rollout::Request>> reqs = task_requests(task, codec, 0, 8, true, ro);
  EXPECT_TRUE(reqs.ok()) << reqs.status().message();
  rollout::EngineOptions eo;
  eo.max_batch = 8, eo.max_seq = 128, eo.speculative = false, eo.arms = {};
  auto engine = rollout::Engine::create(target, model::Drafter(nullptr), eo);
  EXPECT_TRUE(engine.ok());
  drafter::HiddenBuffer buffer;
  for (const rollout::Request& r : *reqs) buffer.add_request(r.id, int64_t(r.prompt.size()));
  (*engine)->set_hidden_sink(buffer.sink());
  EXPECT_TRUE((*engine)->generate(*reqs).ok());
  std::mt19937_64 rng(1);
  std::vector<torch::Tensor> b = drafter::sample_windows({buffer.tensors()}, 32, rng);
  torch::NoGradGuard no_grad;
  return drafter::drafter_loss(drafter, target, b[0], b[1], b[2]).item<double>();
}

TEST(RlFromModel, DrafterWarmStartOnGenerationsLowersLossAndIsCached) {
  StatusOr<model::PretrainedModel> m = model::load_pretrained(kLlama);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::unique_ptr<ModelCodec> codec = llama_codec();
  ASSERT_TRUE(codec);
  std::unique_ptr<Task> task = arithmetic();
  std::string cache = ::testing::TempDir() + "/drafter-generations-" + std::to_string(getpid());
  std::filesystem::remove_all(cache);
  GenerationsWarmStartOptions o = small_warm_start(codec.get());
  torch::manual_seed(5);
  model::Drafter drafter(m->model, 1);
  double before = held_out_drafter_loss(m->model, drafter, *codec, *task);
  StatusOr<GenerationsWarmStart> first = load_or_train_drafter_on_generations(
      m->model, drafter, *task, o, "tiny-llama", "arithmetic-cot-1", cache);
  ASSERT_TRUE(first.ok()) << first.status().message();
  double after = held_out_drafter_loss(m->model, drafter, *codec, *task);
  std::cout << "held-out drafter loss: untrained " << before << ", warmed " << after
            << "; training loss " << first->loss_first << " -> " << first->loss_last << " over "
            << first->generated_tokens << " generated tokens\n";
  EXPECT_TRUE(first->trained);
  EXPECT_LT(after, 0.9 * before);
  EXPECT_LT(first->loss_last, first->loss_first);
  ASSERT_TRUE(first->draft_vocab.defined());
  EXPECT_EQ(first->draft_vocab.numel(), 16);
  EXPECT_EQ(drafter->draft_vocab_size(), 16);
  EXPECT_GT(first->generated_tokens, 12);

  // A second call loads: a fresh drafter gets the same weights and vocabulary, without training.
  torch::manual_seed(9);
  model::Drafter again(m->model, 1);
  bool called = false;
  StatusOr<GenerationsWarmStart> second = load_or_train_drafter_on_generations(
      m->model, again, *task, o, "tiny-llama", "arithmetic-cot-1", cache,
      [&](int64_t, double) { called = true; });
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_FALSE(second->trained);
  EXPECT_FALSE(called) << "a cached warm start must not train";
  EXPECT_EQ(second->cache_path, first->cache_path);
  EXPECT_TRUE(torch::equal(second->draft_vocab, first->draft_vocab));
  auto want = drafter->named_parameters();
  for (const auto& p : again->named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), want[p.key()])) << p.key();
  EXPECT_DOUBLE_EQ(held_out_drafter_loss(m->model, again, *codec, *task), after);

  // Another seed is another cache entry.
  GenerationsWarmStartOptions other = o;
  other.steps = 2;
  model::Drafter third(m->model, 1);
  StatusOr<GenerationsWarmStart> r3 = load_or_train_drafter_on_generations(
      m->model, third, *task, other, "tiny-llama", "arithmetic-cot-1", cache);
  ASSERT_TRUE(r3.ok()) << r3.status().message();
  EXPECT_TRUE(r3->trained);
  EXPECT_NE(r3->cache_path, first->cache_path);

  // A damaged cache file is refused with its path and the fix, and left as it is.
  {
    std::fstream f(first->cache_path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-16, std::ios::end);
    f.write("garbage-garbage!", 16);
  }
  auto size = std::filesystem::file_size(first->cache_path);
  model::Drafter fourth(m->model, 1);
  StatusOr<GenerationsWarmStart> bad = load_or_train_drafter_on_generations(
      m->model, fourth, *task, o, "tiny-llama", "arithmetic-cot-1", cache);
  ASSERT_FALSE(bad.ok());
  std::cout << bad.status().to_string() << "\n";
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  EXPECT_NE(bad.status().message().find(first->cache_path), std::string::npos);
  EXPECT_NE(bad.status().message().find("delete"), std::string::npos);
  EXPECT_EQ(std::filesystem::file_size(first->cache_path), size);
  std::filesystem::remove_all(cache);
}

TEST(RlFromModel, DrafterWarmStartOnGenerationsChecksItsOptions) {
  StatusOr<model::PretrainedModel> m = model::load_pretrained(kLlama);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::unique_ptr<Task> task = arithmetic();
  GenerationsWarmStartOptions o = small_warm_start(nullptr);
  o.max_seq = 30;  // no room for 24 new tokens, a prompt and the headroom
  model::Drafter drafter(m->model, 1);
  StatusOr<GenerationsWarmStart> r = drafter_warm_start_on_generations(m->model, drafter, *task, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("max_seq"), std::string::npos) << r.status().message();
  for (int64_t levels : {int64_t(0), drafter::kMaxLevels + 1}) {
    GenerationsWarmStartOptions bad = small_warm_start(nullptr);
    bad.train_levels = levels;
    Status s = bad.validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << levels;
    EXPECT_NE(s.message().find("train_levels"), std::string::npos) << s.message();
  }
}

// Unrolled training is its own cache entry, and the held-out agreement counts every greedy
// answer's positions from the prompt's last one on, deeper levels a subset of shallower ones.
TEST(RlFromModel, DrafterTrainLevelsAreCachedApartAndAgreementCountsEveryAnswer) {
  StatusOr<model::PretrainedModel> m = model::load_pretrained(kLlama);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::unique_ptr<ModelCodec> codec = llama_codec();
  ASSERT_TRUE(codec);
  std::unique_ptr<Task> task = arithmetic();
  std::string cache = ::testing::TempDir() + "/drafter-levels-" + std::to_string(getpid());
  std::filesystem::remove_all(cache);
  GenerationsWarmStartOptions o = small_warm_start(codec.get());
  o.steps = 20;
  std::vector<std::string> paths;
  for (int64_t levels : {1, 3}) {
    o.train_levels = levels;
    torch::manual_seed(5);
    model::Drafter drafter(m->model, 1);
    StatusOr<GenerationsWarmStart> w = load_or_train_drafter_on_generations(
        m->model, drafter, *task, o, "tiny-llama", "arithmetic-cot-1", cache);
    ASSERT_TRUE(w.ok()) << w.status().message();
    EXPECT_TRUE(w->trained) << levels << " levels: a cache entry of its own";
    paths.push_back(w->cache_path);
    StatusOr<drafter::LevelAgreement> a =
        held_out_agreement(m->model, drafter, *task, codec.get(), 0, 4, 24, 128, 4);
    ASSERT_TRUE(a.ok()) << a.status().message();
    ASSERT_EQ(a->bases.size(), 4u);
    std::cout << levels << " training levels: greedy agreement by level " << a->share(0) << " "
              << a->share(1) << " " << a->share(2) << " " << a->share(3) << " over " << a->bases[0]
              << " bases\n";
    EXPECT_GE(a->bases[0], 4) << "at least one base per answer";
    EXPECT_LE(a->bases[0], 4 * 24);
    for (size_t d = 1; d < 4; ++d) {
      EXPECT_LE(a->bases[d], a->bases[d - 1]);
      EXPECT_LE(a->agreed[d], a->agreed[d - 1]);
    }
  }
  EXPECT_NE(paths[0], paths[1]);
  std::filesystem::remove_all(cache);
}

// The acceptance curve and the progress lines leave the trained drafter as it is without them;
// the curve's last point is held_out_agreement on the same problems, and a cached warm start
// brings back the curve it was trained with.
TEST(RlFromModel, DrafterWarmStartCurveAndProgressLeaveTheDrafterAsItIs) {
  StatusOr<model::PretrainedModel> m = model::load_pretrained(kLlama);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::unique_ptr<ModelCodec> codec = llama_codec();
  ASSERT_TRUE(codec);
  std::unique_ptr<Task> task = arithmetic();
  GenerationsWarmStartOptions plain = small_warm_start(codec.get());
  plain.steps = 20;
  torch::manual_seed(5);
  model::Drafter want(m->model, 1);
  ASSERT_TRUE(drafter_warm_start_on_generations(m->model, want, *task, plain).ok());

  GenerationsWarmStartOptions o = plain;
  std::vector<std::string> lines;
  o.log = [&](const std::string& s) { lines.push_back(s); };
  o.log_seconds = 0;  // a line at every event
  o.curve_every = 8, o.curve_problems = 3, o.curve_levels = 3, o.curve_first = 40;
  EXPECT_EQ(o.key(), plain.key()) << "neither changes what is trained";
  std::string cache = ::testing::TempDir() + "/drafter-curve-" + std::to_string(getpid());
  std::filesystem::remove_all(cache);
  torch::manual_seed(5);
  model::Drafter got(m->model, 1);
  StatusOr<GenerationsWarmStart> w = load_or_train_drafter_on_generations(
      m->model, got, *task, o, "tiny-llama", "arithmetic-cot-1", cache);
  ASSERT_TRUE(w.ok()) << w.status().message();
  auto params = want->named_parameters();
  for (const auto& p : got->named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), params[p.key()])) << p.key();
  EXPECT_GT(w->generation_seconds, 0);
  EXPECT_EQ(w->threads, at::get_num_threads());

  std::vector<int64_t> steps;
  for (const drafter::CurvePoint& p : w->curve) steps.push_back(p.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 8, 16, 20}));
  StatusOr<drafter::LevelAgreement> last =
      held_out_agreement(m->model, got, *task, codec.get(), o.curve_first, o.curve_problems,
                         o.max_new_tokens, o.max_seq, o.curve_levels);
  ASSERT_TRUE(last.ok()) << last.status().message();
  ASSERT_FALSE(w->curve.empty());
  EXPECT_EQ(w->curve.back().agreement.agreed, last->agreed);
  EXPECT_EQ(w->curve.back().agreement.bases, last->bases);

  auto has = [&](const std::string& part) {
    for (const std::string& l : lines)
      if (l.find(part) != std::string::npos) return true;
    return false;
  };
  std::cout << drafter::format_curve(w->curve);
  EXPECT_TRUE(has("generating 12 answers (temperature 1, top-p 1, seed 3"));
  EXPECT_TRUE(has("generated answers 6/12, "));
  EXPECT_TRUE(has(" tokens/s, eta "));
  EXPECT_TRUE(has("generated answers 12/12, " + std::to_string(w->generated_tokens) + " tokens, "));
  EXPECT_TRUE(has("training step 20/20, loss "));
  EXPECT_TRUE(has("acceptance step 8: d1 "));
  EXPECT_TRUE(has("drafter acceptance curve"));

  lines.clear();
  model::Drafter again(m->model, 1);
  StatusOr<GenerationsWarmStart> loaded = load_or_train_drafter_on_generations(
      m->model, again, *task, o, "tiny-llama", "arithmetic-cot-1", cache);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_FALSE(loaded->trained);
  ASSERT_EQ(loaded->curve.size(), w->curve.size());
  EXPECT_EQ(drafter::encode_curve(loaded->curve), drafter::encode_curve(w->curve));
  EXPECT_TRUE(has("drafter warm start: loaded " + w->cache_path));
  EXPECT_TRUE(has("drafter acceptance curve"));
  std::filesystem::remove_all(cache);

  // The sampling that makes the generations is in the key; a change of it trains anew.
  for (auto change : std::vector<std::function<void(GenerationsWarmStartOptions*)>>{
           [](GenerationsWarmStartOptions* x) { x->temperature = 0.7; },
           [](GenerationsWarmStartOptions* x) { x->top_p = 0.9; },
           [](GenerationsWarmStartOptions* x) { x->seed = 4; },
           [](GenerationsWarmStartOptions* x) { x->generation_batch = 4; }}) {
    GenerationsWarmStartOptions other = plain;
    change(&other);
    EXPECT_NE(other.key(), plain.key());
  }

  GenerationsWarmStartOptions bad = plain;
  bad.curve_every = 5, bad.curve_levels = 0;
  EXPECT_EQ(bad.validate().code(), StatusCode::kInvalidArgument);
  bad.curve_levels = 2, bad.curve_problems = 0;
  EXPECT_EQ(bad.validate().code(), StatusCode::kInvalidArgument);
}

TEST(DrafterCurve, FormatsAndRoundTripsThroughText) {
  drafter::AcceptanceCurve c;
  c.push_back({0, {{1, 0}, {40, 40}}});
  c.push_back({200, {{30, 10}, {40, 38}}});
  EXPECT_NEAR(c[1].accepted(), 0.75 + 10.0 / 38, 1e-12);
  EXPECT_EQ(drafter::format_point(c[1]), "step 200: d1 0.750 d2 0.263 accepted 1.01 of 2");
  std::string text = drafter::encode_curve(c);
  EXPECT_EQ(text, "0:1/40,0/40;200:30/40,10/38");
  drafter::AcceptanceCurve back = drafter::decode_curve(text);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].step, 200);
  EXPECT_EQ(back[1].agreement.agreed, c[1].agreement.agreed);
  EXPECT_EQ(back[1].agreement.bases, c[1].agreement.bases);
  EXPECT_TRUE(drafter::decode_curve("0:5/4").empty()) << "more agreed than bases";
  EXPECT_TRUE(drafter::decode_curve("x").empty());
  EXPECT_TRUE(drafter::decode_curve("").empty());
  std::string table = drafter::format_curve(c);
  EXPECT_NE(table.find("share of 40 held-out positions"), std::string::npos) << table;
  EXPECT_NE(table.find("    200  0.750  0.263  1.01\n"), std::string::npos) << table;
  EXPECT_EQ(drafter::format_curve({}), "");
}

// 4 rows of random tokens below `vocab` from torch's generator: row i has a prompt of 3 + i tokens
// and a response of longest - 2i.
SequenceBatch random_batch(int64_t vocab, int64_t longest) {
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int64_t i = 0; i < 4; ++i) {
    torch::Tensor p = torch::randint(vocab, {3 + i}, torch::kInt64);            // (3+i,)
    torch::Tensor r = torch::randint(vocab, {longest - 2 * i}, torch::kInt64);  // (longest-2i,)
    prompts.emplace_back(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel());
    responses.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
  }
  return make_batch(prompts, responses);
}

// The tiny llama in float64, where only summation order separates two ways of computing.
model::Transformer float64_llama() {
  StatusOr<model::PretrainedModel> m = model::load_pretrained(kLlama);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return model::Transformer(nullptr);
  m->model->to(torch::kFloat64);
  return m->model;
}

// The gradients of sum(logp * weights) with respect to every parameter of `policy`.
std::vector<torch::Tensor> gradients(model::Transformer& policy, const torch::Tensor& logp,
                                     const torch::Tensor& weights) {
  policy->zero_grad();
  (logp * weights).sum().backward();
  std::vector<torch::Tensor> out;
  for (const auto& p : policy->parameters()) out.push_back(p.grad().clone());
  return out;
}

// The largest elementwise difference between two lists of gradients.
double max_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

// The policy update's log-probabilities (LM head on response positions only, a few rows of logits
// at a time, recomputed in the backward) equal the plain (B, T-1, V) log_softmax and its gradient,
// in float64 on the tiny llama (tied head) at a sampling temperature.
TEST(RlFromModel, ChunkedLogprobsAndGradientsEqualTheFullLogSoftmax) {
  model::Transformer policy = float64_llama();
  ASSERT_FALSE(policy.is_empty());
  int64_t v = policy->config().vocab;
  torch::manual_seed(3);
  SequenceBatch batch = random_batch(v, 7);
  torch::Tensor weights = torch::randn(batch.mask.sizes(), torch::kFloat64);  // (B, T-1)
  const double temperature = 0.7;
  auto grads = [&](const torch::Tensor& logp) {
    return gradients(policy, logp, batch.mask * weights);
  };
  int64_t t = batch.tokens.size(1);
  torch::Tensor positions = torch::arange(t - 1, torch::kInt64).unsqueeze(0).expand({4, t - 1});
  torch::Tensor logits = policy->forward(batch.tokens.narrow(1, 0, t - 1), positions).logits;
  torch::Tensor full = token_logprobs(logits / temperature, batch.targets) * batch.mask;
  std::vector<torch::Tensor> g_full = grads(full);
  // 3 rows of logits per chunk: the 4 rows' 13 response positions take 5 chunks.
  torch::Tensor chunked = sequence_logprobs(policy, batch, temperature, 3 * v);
  std::vector<torch::Tensor> g_chunked = grads(chunked);
  double maxdiff = (chunked - full).abs().max().item<double>();
  double gdiff = max_difference(g_chunked, g_full);
  std::cout << "log-probs maxdiff " << maxdiff << ", gradients maxdiff " << gdiff << "\n";
  EXPECT_LT(maxdiff, 1e-10);
  EXPECT_LT(gdiff, 1e-10);
  EXPECT_EQ((chunked * (1 - batch.mask)).abs().sum().item<double>(), 0.0) << "0 off the mask";
  // With room for all logits (the default budget here), the one plain log_softmax.
  EXPECT_TRUE(sequence_logprobs(policy, batch, temperature).equal(full));
  EXPECT_GT(full.abs().sum().item<double>(), 1.0);
  EXPECT_GT(g_full.back().abs().sum().item<double>(), 0.0);
}

// A GRPO group: 5 samples of one 24-token prompt (one of them empty) with responses of
// different lengths, right-padded.
SequenceBatch group_batch(int64_t vocab) {
  torch::Tensor p = torch::randint(vocab, {24}, torch::kInt64);  // (24,)
  std::vector<int64_t> prompt(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + 24);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int64_t n : {9, 3, 0, 14, 1}) {
    torch::Tensor r = torch::randint(vocab, {n}, torch::kInt64);  // (n,)
    prompts.push_back(prompt);
    responses.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + n);
  }
  return make_batch(prompts, responses);
}

// A group's prompt run once (batch 1) and attended to by every sample gives the log-probabilities
// and gradients of running each sample's whole sequence, in float64 on the tiny llama (tied head,
// chunked head), at a sampling temperature; in bfloat16 products it follows them to bfloat16's
// precision.
TEST(RlFromModel, SharedPromptLogprobsAndGradientsEqualTheWholeSequences) {
  model::Transformer policy = float64_llama();
  ASSERT_FALSE(policy.is_empty());
  int64_t v = policy->config().vocab;
  torch::manual_seed(4);
  SequenceBatch batch = group_batch(v);
  EXPECT_EQ(shared_prefix_length(batch), 23) << "the prompt less its last token";
  torch::Tensor weights = torch::randn(batch.mask.sizes(), torch::kFloat64);  // (B, T-1)
  auto grads = [&](const torch::Tensor& logp) { return gradients(policy, logp, weights); };
  const double temperature = 0.7;
  torch::Tensor whole = sequence_logprobs(policy, batch, temperature, 3 * v, false);
  std::vector<torch::Tensor> g_whole = grads(whole);
  torch::Tensor shared = sequence_logprobs(policy, batch, temperature, 3 * v, true);
  std::vector<torch::Tensor> g_shared = grads(shared);
  double maxdiff = (shared - whole).abs().max().item<double>();
  double gdiff = max_difference(g_shared, g_whole);
  std::cout << "log-probs maxdiff " << maxdiff << ", gradients maxdiff " << gdiff << "\n";
  EXPECT_LT(maxdiff, 1e-10);
  EXPECT_LT(gdiff, 1e-10);
  EXPECT_EQ((shared * (1 - batch.mask)).abs().sum().item<double>(), 0.0) << "0 off the mask";
  EXPECT_GT(whole.abs().sum().item<double>(), 1.0);
  // The prompt's gradients come from every sample: the embedding rows of prompt tokens moved.
  EXPECT_GT(g_whole.front().abs().sum().item<double>(), 0.0);
  // A prompt shorter than kMinSharedPrefix runs with each row (nothing to compare but equality).
  SequenceBatch short_prompts = make_batch({{1, 2, 3}, {1, 2, 3}}, {{4, 5}, {6}});
  EXPECT_EQ(shared_prefix_length(short_prompts), 2);
  EXPECT_TRUE(sequence_logprobs(policy, short_prompts, 1.0, 3 * v, true)
                  .equal(sequence_logprobs(policy, short_prompts, 1.0, 3 * v, false)));
  // Mixed precision: the shared prefix's products run in bfloat16 too.
  policy->to(torch::kFloat32);
  torch::Tensor f32 = sequence_logprobs(policy, batch, temperature, 3 * v, false), bf16;
  {
    model::Bfloat16Autocast mixed(policy->lm_head->weight.device(), true);
    bf16 = sequence_logprobs(policy, batch, temperature, 3 * v, true);
  }
  EXPECT_EQ(bf16.scalar_type(), torch::kFloat32);
  double bdiff = (bf16 - f32).abs().max().item<double>();
  std::cout << "bfloat16 shared vs float32 whole: maxdiff " << bdiff << "\n";
  EXPECT_LT(bdiff, 0.1);
  EXPECT_GT(bdiff, 0.0);
}

// Mixed precision (spec.model.dtype bfloat16): the same chunked log-probabilities and their
// gradients with the products in bfloat16 follow the float32 ones to bfloat16's precision, come
// back in float32, and differ from them (the products did run in bfloat16).
TEST(RlFromModel, MixedPrecisionLogprobsAndGradientsFollowFloat32) {
  StatusOr<model::PretrainedModel> m = model::load_pretrained(kLlama);
  ASSERT_TRUE(m.ok()) << m.status().message();
  model::Transformer policy = m->model;
  int64_t v = policy->config().vocab;
  torch::manual_seed(4);
  SequenceBatch batch = random_batch(v, 9);
  torch::Tensor weights = torch::randn(batch.mask.sizes());  // (B, T-1)
  struct Run {
    torch::Tensor logp;                // (B, T-1)
    std::vector<torch::Tensor> grads;  // one per parameter
  };
  auto run = [&](bool bf16, int64_t max_logits) {
    policy->zero_grad();
    Run r;
    {
      model::Bfloat16Autocast mixed(torch::kCPU, bf16);
      r.logp = sequence_logprobs(policy, batch, 0.7, max_logits);
    }
    (r.logp * weights).sum().backward();
    for (const auto& p : policy->parameters()) r.grads.push_back(p.grad().clone());
    return r;
  };
  for (int64_t max_logits : {3 * v, kMaxLogitsPerChunk}) {  // chunked, then the dense path
    Run f = run(false, max_logits), h = run(true, max_logits);
    ASSERT_EQ(h.logp.scalar_type(), torch::kFloat32);
    double logp_diff = (h.logp - f.logp).abs().max().item<double>();
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < f.grads.size(); ++i) {
      ASSERT_EQ(h.grads[i].scalar_type(), torch::kFloat32);
      num += (h.grads[i] - f.grads[i]).pow(2).sum().item<double>();
      den += f.grads[i].pow(2).sum().item<double>();
    }
    double grad_rel = std::sqrt(num / den);
    std::cout << "max_logits " << max_logits << ": log-probs maxdiff " << logp_diff
              << ", gradients relative difference " << grad_rel << "\n";
    EXPECT_GT(logp_diff, 0.0) << "bfloat16 products round differently from float32 ones";
    EXPECT_LT(logp_diff, 0.25);
    EXPECT_GT(grad_rel, 0.0);
    EXPECT_LT(grad_rel, 0.1);
  }
}

}  // namespace
}  // namespace tlt::rl
