#include "runtime/rl/dataset_task.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include "api/fnv.h"
#include "api/json_bounded.h"
#include "runtime/clock.h"
#include "runtime/rl/seeds.h"

namespace tlt::rl {
namespace {
using json = nlohmann::json;

// A row's prompt: text, or chat messages (then `text` joins their contents).
struct RowPrompt {
  std::string text;
  std::vector<ChatTurn> turns;
  bool messages = false;
};

std::string fields_of(const json& row) {
  std::string out;
  for (auto it = row.begin(); it != row.end(); ++it) out += (out.empty() ? "" : ", ") + it.key();
  return out.empty() ? "none" : out;
}

StatusOr<RowPrompt> read_prompt(const json& row, const std::string& field) {
  const std::string name = "spec.task.dataset.promptField";
  const json* v = dataset::at_path(row, field);
  if (!v)
    return Status::InvalidArgument(name + ": the row has no field \"" + field +
                                   "\" (its fields: " + fields_of(row) + ")");
  RowPrompt p;
  if (v->is_string()) {
    p.text = v->get<std::string>();
    return p;
  }
  const std::string shape = "; a prompt is a string or a list of chat messages [{role, content}]";
  if (!v->is_array() || v->empty())
    return Status::InvalidArgument(
        name + ": \"" + field + "\" is " +
        (v->is_array() ? "an empty list" : std::string("a ") + v->type_name()) + shape);
  p.messages = true;
  for (size_t k = 0; k < v->size(); ++k) {
    const json& m = (*v)[k];
    auto role = m.is_object() ? m.find("role") : m.end();
    auto content = m.is_object() ? m.find("content") : m.end();
    if (!m.is_object() || role == m.end() || !role->is_string() || content == m.end() ||
        !content->is_string())
      return Status::InvalidArgument(name + ": \"" + field + "\" message " + std::to_string(k) +
                                     " is not {\"role\": string, \"content\": string}" + shape);
    p.turns.push_back({role->get<std::string>(), content->get<std::string>()});
    p.text += (p.text.empty() ? "" : "\n") + p.turns.back().content;
  }
  return p;
}

// The chat turns of a problem's messages_json (row_problem's [{role, content}] list).
StatusOr<std::vector<ChatTurn>> turns_of(const Problem& p) {
  const std::string where = "problem " + p.id + ": messages_json";
  StatusOr<json> list = api::parse_json_bounded(p.messages_json, where);
  if (!list.ok()) return list.status();
  std::vector<ChatTurn> turns;
  if (list->is_array())
    for (const json& m : *list)
      if (m.is_object() && m.value("role", json()).is_string() &&
          m.value("content", json()).is_string())
        turns.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  if (turns.empty()) return Status::InvalidArgument(where + " is not a message list");
  return turns;
}

// f(k) for every k < n on every core; progress(done) from this thread every 5 s until all are.
void on_every_core(size_t n, const std::function<void(size_t)>& f,
                   const std::function<void(size_t)>& progress) {
  constexpr size_t kChunk = 256;
  size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()),
                                    (n + kChunk - 1) / kChunk);
  std::atomic<size_t> next{0}, done{0};
  auto work = [&] {
    for (size_t at; (at = next.fetch_add(kChunk)) < n;) {
      size_t end = std::min(n, at + kChunk);
      for (size_t k = at; k < end; ++k) f(k);
      done += end - at;
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(work);
  for (double next_report = runtime::now_s() + 5; done.load() < n;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (runtime::now_s() < next_report) continue;
    progress(done.load());
    next_report += 5;
  }
  for (std::thread& t : pool) t.join();
}

// The first index >= at that starts a UTF-8 character of `s`.
size_t char_start(const std::string& s, size_t at) {
  while (at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) ++at;
  return at;
}

}  // namespace

Status DatasetTask::check_row(const api::DatasetSpec& spec, const reward::VerifierOptions* verifier,
                              const json& row) {
  StatusOr<RowPrompt> prompt = read_prompt(row, spec.prompt_field);
  if (!prompt.ok()) return prompt.status();
  const json* answer = dataset::at_path(row, spec.answer_field);
  if (!answer)
    return Status::InvalidArgument("spec.task.dataset.answerField: the row has no field \"" +
                                   spec.answer_field + "\" (its fields: " + fields_of(row) + ")");
  if (verifier) {
    StatusOr<double> probe = reward::score(*verifier, "", *answer);
    if (!probe.ok())
      return Status::InvalidArgument("spec.task.dataset.answerField: \"" + spec.answer_field +
                                     "\": " + probe.status().message());
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<DatasetTask>> DatasetTask::open(
    const api::DatasetSpec& spec, const api::RewardSpec& reward, uint64_t seed,
    const std::function<void(const std::string&)>& log) {
  std::unique_ptr<DatasetTask> t(new DatasetTask());
  t->spec_ = spec, t->reward_spec_ = reward, t->seed_ = seed;
  StatusOr<std::optional<reward::VerifierOptions>> verifier = reward::verifier_options(reward);
  if (!verifier.ok()) return verifier.status();
  t->builtin_ = verifier->has_value();
  if (t->builtin_) t->verifier_ = **verifier;
  std::vector<uint64_t> hashes;
  bool hash_rows = spec.held_out_path.empty();
  auto check = [&](uint64_t, const json& row) -> Status {
    TLT_RETURN_IF_ERROR(check_row(spec, t->builtin_ ? &t->verifier_ : nullptr, row));
    uint64_t h = fnv1a64(row.dump());
    t->fingerprint_ = mix_seeds(t->fingerprint_, h);
    if (hash_rows) hashes.push_back(mix_seeds(seed, h));
    return Status::Ok();
  };
  for (int s = 0; s < (spec.held_out_path.empty() ? 1 : 2); ++s) {
    const std::string& path = s == 0 ? spec.path : spec.held_out_path;
    const std::string field = s == 0 ? "spec.task.dataset.path" : "spec.task.dataset.heldOutPath";
    hash_rows = s == 0 && spec.held_out_path.empty();
    dataset::OpenOptions read;
    read.visit = check;
    if (log)
      read.progress = [&log](const dataset::ReadProgress& p) {
        log("dataset: " + dataset::progress_line(p));
      };
    StatusOr<std::unique_ptr<dataset::Dataset>> d = dataset::Dataset::open(path, read);
    if (!d.ok()) return d.status().with_context(field);
    if ((*d)->rows() == 0) return Status::InvalidArgument(field + ": " + path + " holds no rows");
    t->sources_.push_back({std::move(*d), s == 1});
  }
  TLT_RETURN_IF_ERROR(t->split(hashes));
  t->fingerprint_ =
      fnv1a64(spec.prompt_field + "|" + spec.answer_field + "|" + std::to_string(spec.held_out) +
                  "|" + spec.long_prompts + "|" + std::to_string(seed),
              t->fingerprint_);
  return t;
}

// The held-out rows: heldOutPath's, or the heldOut rows of smallest hash (ties: the earlier row).
Status DatasetTask::split(const std::vector<uint64_t>& hashes) {
  uint64_t rows = sources_[0].data->rows();
  if (rows > UINT32_MAX)
    return Status::InvalidArgument("spec.task.dataset.path: more than 2^32 - 1 rows");
  if (sources_.size() == 2) {
    for (uint64_t r = 0; r < rows; ++r) train_.push_back({0, r});
    for (uint64_t r = 0; r < sources_[1].data->rows(); ++r) held_.push_back({1, r});
    return Status::Ok();
  }
  uint64_t n_held = uint64_t(std::max(spec_.held_out, 0));
  if (n_held >= rows)
    return Status::InvalidArgument("spec.task.dataset.heldOut: " + std::to_string(n_held) +
                                   " rows held out of the " + std::to_string(rows) + " rows of " +
                                   spec_.path +
                                   " leave none to train on; lower heldOut or give heldOutPath");
  std::vector<uint64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  auto less = [&](uint64_t a, uint64_t b) {
    return hashes[a] != hashes[b] ? hashes[a] < hashes[b] : a < b;
  };
  std::nth_element(order.begin(), order.begin() + int64_t(n_held), order.end(), less);
  std::vector<bool> is_held(rows, false);
  for (uint64_t k = 0; k < n_held; ++k) is_held[order[k]] = true;
  for (uint64_t r = 0; r < rows; ++r) (is_held[r] ? held_ : train_).push_back({0, r});
  return Status::Ok();
}

Problem DatasetTask::row_problem(const RowRef& r, size_t drop) const {
  const dataset::Dataset& d = *sources_[r.source].data;
  Problem p;
  p.id = d.where(r.row);
  StatusOr<json> row = d.row(r.row);
  if (!row.ok()) return p;
  StatusOr<RowPrompt> prompt = read_prompt(*row, spec_.prompt_field);
  const json* answer = dataset::at_path(*row, spec_.answer_field);
  if (!prompt.ok() || !answer) return p;
  if (prompt->messages) {
    std::string& last = prompt->turns.back().content;
    last.erase(0, std::min(drop, last.size()));
    json list = json::array();
    for (const ChatTurn& t : prompt->turns)
      list.push_back({{"role", t.role}, {"content", t.content}});
    p.messages_json = list.dump();
    prompt->text.clear();
    for (const ChatTurn& t : prompt->turns)
      prompt->text += (prompt->text.empty() ? "" : "\n") + t.content;
    p.prompt = prompt->text;
  } else {
    p.prompt = prompt->text.substr(std::min(drop, prompt->text.size()));
  }
  p.reference_json = answer->dump();
  p.answer = answer->is_string() ? answer->get<std::string>() : p.reference_json;
  p.fields_json = reward_fields_json(reward_spec_.row_fields, *row);
  return p;
}

std::string reward_fields_json(const std::vector<std::string>& names, const json& row) {
  if (names.empty()) return "";
  json fields = json::object();
  for (const std::string& name : names) {
    if (name == "*") {
      fields["row"] = row;
      continue;
    }
    const json* v = dataset::at_path(row, name);
    fields[name] = v ? *v : json();
  }
  return fields.dump(-1, ' ', false, json::error_handler_t::replace);
}

StatusOr<std::vector<int64_t>> DatasetTask::encode(const Codec& codec, const Problem& p) const {
  if (p.messages_json.empty()) return codec.encode_prompt(p.prompt, p.prompt);
  StatusOr<std::vector<ChatTurn>> turns = turns_of(p);
  if (!turns.ok()) return turns.status();
  return codec.encode_messages(*turns);
}

// Row r's prompt ids under longPrompts; *keep false when the row is skipped.
StatusOr<std::vector<int64_t>> DatasetTask::fit_row(const Codec& codec, int64_t max_prompt,
                                                    RowRef r, bool* keep) {
  *keep = true;
  Problem p = row_problem(r, 0);
  StatusOr<std::vector<int64_t>> ids = encode(codec, p);
  if (!ids.ok()) return ids.status().with_context(p.id);
  if (int64_t(ids->size()) <= max_prompt) return ids;
  const std::string over = p.id + ": the prompt is " + std::to_string(ids->size()) +
                           " tokens, more than the " + std::to_string(max_prompt) +
                           " the model's context leaves besides spec.algorithm.maxResponseTokens";
  if (spec_.long_prompts == "fail")
    return Status::FailedPrecondition("spec.task.dataset.longPrompts (fail): " + over);
  if (spec_.long_prompts != "truncate") {
    *keep = false, ++skipped_;
    return ids;
  }
  // The text truncate cuts: the prompt, or a message list's last content.
  std::string text = p.prompt;
  if (!p.messages_json.empty()) {
    StatusOr<std::vector<ChatTurn>> turns = turns_of(p);
    if (!turns.ok()) return turns.status();
    text = turns->back().content;
  }
  auto size = [&](size_t drop) -> StatusOr<int64_t> {
    StatusOr<std::vector<int64_t>> cut = encode(codec, row_problem(r, drop));
    if (!cut.ok()) return cut.status().with_context(p.id);
    return int64_t(cut->size());
  };
  StatusOr<int64_t> bare = size(text.size());
  if (!bare.ok()) return bare.status();
  if (*bare > max_prompt)
    return Status::FailedPrecondition("spec.task.dataset.longPrompts (truncate): " + over +
                                      ", and so is its chat template (other turns) alone");
  size_t lo = 1, hi = text.size();  // dropping hi characters fits
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    StatusOr<int64_t> n = size(char_start(text, mid));
    if (!n.ok()) return n.status();
    if (*n <= max_prompt)
      hi = mid;
    else
      lo = mid + 1;
  }
  drop_[key(r)] = char_start(text, hi);
  ++truncated_;
  return encode(codec, row_problem(r, drop_[key(r)]));
}

Status DatasetTask::fit(const Codec& codec, int64_t max_prompt,
                        const std::function<void(const std::string&)>& log) {
  const uint64_t total = train_.size() + held_.size();
  uint64_t before = 0;  // rows of the splits already tokenized
  for (std::vector<RowRef>* split : {&train_, &held_}) {
    // Every prompt's length at once (the codec is immutable, rows are read with pread), then
    // longPrompts in order on the rows too long.
    std::vector<int64_t> sizes(split->size(), -1);
    std::vector<Status> errors(split->size());
    on_every_core(
        split->size(),
        [&](size_t k) {
          Problem p = row_problem((*split)[k], 0);
          StatusOr<std::vector<int64_t>> ids = encode(codec, p);
          if (ids.ok())
            sizes[k] = int64_t(ids->size());
          else
            errors[k] = ids.status().with_context(p.id);
        },
        [&](size_t done) {
          if (log)
            log("dataset: tokenizing prompts: " + std::to_string(before + done) + " of " +
                std::to_string(total));
        });
    before += split->size();
    std::vector<RowRef> kept;
    for (size_t k = 0; k < split->size(); ++k) {
      if (!errors[k].ok()) return errors[k];
      bool keep = true;
      if (sizes[k] > max_prompt) {
        StatusOr<std::vector<int64_t>> ids = fit_row(codec, max_prompt, (*split)[k], &keep);
        if (!ids.ok()) return ids.status();
      }
      if (keep) kept.push_back((*split)[k]);
    }
    if (kept.empty() && !split->empty())
      return Status::FailedPrecondition(
          std::string("spec.task.dataset.longPrompts (skip): every ") +
          (split == &train_ ? "training" : "held-out") + " row's prompt is longer than the " +
          std::to_string(max_prompt) +
          " tokens the model's context leaves besides spec.algorithm.maxResponseTokens");
    *split = std::move(kept);
  }
  std::lock_guard<std::mutex> lock(mu_);
  perm_epoch_ = UINT64_MAX;
  return Status::Ok();
}

uint64_t DatasetTask::train_row(uint64_t j) const {
  uint64_t n = train_.size(), epoch = j / n;
  std::lock_guard<std::mutex> lock(mu_);
  if (perm_epoch_ != epoch) {
    perm_.resize(n);
    std::iota(perm_.begin(), perm_.end(), 0u);
    uint64_t state = mix_seeds(seed_, epoch + 0x5EED);
    for (uint64_t k = n - 1; k > 0; --k) {  // Fisher-Yates, splitmix64 draws
      state += 0x9E3779B97F4A7C15ull;
      uint64_t z = state;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      std::swap(perm_[k], perm_[z % (k + 1)]);
    }
    perm_epoch_ = epoch;
  }
  return train_[perm_[j % n]].row;
}

Problem DatasetTask::problem(uint64_t i, bool held_out) const {
  if (held_out) {
    if (held_.empty()) return Problem{};
    const RowRef& r = held_[i % held_.size()];
    auto d = drop_.find(key(r));
    return row_problem(r, d == drop_.end() ? 0 : d->second);
  }
  if (train_.empty()) return Problem{};
  uint64_t j = (i & 0xFFFFFFFFull) + (i >> 40);
  RowRef r{0, train_row(j)};
  auto d = drop_.find(key(r));
  return row_problem(r, d == drop_.end() ? 0 : d->second);
}

double DatasetTask::reward(const Problem& p, const std::string& response) const {
  if (!builtin_ || p.reference_json.empty()) return 0.0;
  StatusOr<json> answer = api::parse_json_bounded(p.reference_json, "problem " + p.id);
  if (!answer.ok()) return 0.0;
  StatusOr<double> r = reward::score(verifier_, response, *answer);
  return r.ok() ? *r : 0.0;
}

}  // namespace tlt::rl
