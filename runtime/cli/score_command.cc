// `tlt score JOB.yaml ROWS`: the job's reward on rows of {prompt, response, answer} (commands.h).
#include <ostream>

#include <nlohmann/json.hpp>

#include "api/manifest.h"
#include "api/validate.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/reward_probe.h"
#include "runtime/dataset/dataset.h"
#include "runtime/rl/job_setup.h"
#include "runtime/rl/scoring.h"
#include "runtime/rl/tasks.h"

namespace tlt::cli {
namespace {
using json = nlohmann::json;

// The response of a row, one line and at most 60 characters, for a person to recognise it.
std::string excerpt(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= 60) return out + "...";
    out += c == '\n' || c == '\r' || c == '\t' ? ' ' : c;
  }
  return out;
}

// The rows' requests (ids "row-1", ... in order); InvalidArgument naming the row.
StatusOr<std::vector<reward::ScoreRequest>> read_requests(const api::RLJob& job,
                                                          const dataset::Dataset& rows) {
  std::vector<reward::ScoreRequest> out;
  for (uint64_t i = 0; i < rows.rows(); ++i) {
    StatusOr<json> row = rows.row(i);
    if (!row.ok()) return row.status();
    auto response = row->find("response");
    if (response == row->end() || !response->is_string())
      return Status::InvalidArgument(rows.where(i) +
                                     ": the row has no \"response\" string (a row is {\"prompt\", "
                                     "\"response\", \"answer\"} and any fields of the dataset's)");
    StatusOr<reward::ScoreRequest> r =
        row_request(job, *row, "row-" + std::to_string(i + 1), response->get<std::string>());
    if (!r.ok()) return Status::InvalidArgument(rows.where(i) + ": " + r.status().message());
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace

int score_command(const std::string& job_file, const std::string& rows_file, bool as_json,
                  std::ostream& out, std::ostream& err) {
  StatusOr<api::Job> job = read_job(job_file, "tlt score", err);
  if (!job.ok()) return kExitInvalid;
  const auto* rl_job = std::get_if<api::RLJob>(&*job);
  if (!rl_job) {
    err << "tlt score: " << job_file << " is a TSTPretrainJob; only an RLJob has a reward\n";
    return kExitInvalid;
  }
  StatusOr<std::unique_ptr<dataset::Dataset>> rows = dataset::Dataset::open(rows_file);
  if (!rows.ok()) {
    err << "tlt score: " << rows.status().message() << "\n";
    return kExitInvalid;
  }
  StatusOr<std::vector<reward::ScoreRequest>> requests = read_requests(*rl_job, **rows);
  if (!requests.ok()) {
    err << "tlt score: " << requests.status().message() << "\n";
    return kExitInvalid;
  }
  rl::RLRunPlan plan = rl::plan_from_spec(*rl_job, false);
  // A generated task's own reward (type "") reads the task; a dataset's reward never does, and
  // a generated task stands in for it.
  StatusOr<std::unique_ptr<rl::Task>> task =
      rl::make_task(plan.task.has_dataset() ? "arithmetic-cot" : plan.task_name(), plan.task_seed(),
                    rl::TaskOptions{plan.free_text()});
  if (!task.ok()) {
    err << "tlt score: " << task.status().message() << "\n";
    return kExitInvalid;
  }
  StatusOr<std::unique_ptr<reward::Scorer>> scorer = rl::make_run_scorer(plan, **task);
  if (!scorer.ok()) {
    err << "tlt score: " << scorer.status().message() << "\n";
    return kExitInvalid;
  }
  (*scorer)->begin(requests->size());
  for (size_t i = 0; i < requests->size(); ++i) (*scorer)->submit(i, (*requests)[i]);
  StatusOr<std::vector<double>> rewards = (*scorer)->wait();
  if (!rewards.ok()) {
    err << "tlt score: " << rewards.status().message() << "\n";
    return 1;
  }
  double sum = 0, lo = 0, hi = 0;
  for (size_t i = 0; i < rewards->size(); ++i) {
    double r = (*rewards)[i];
    sum += r, lo = i == 0 ? r : std::min(lo, r), hi = i == 0 ? r : std::max(hi, r);
    if (as_json)
      out << json{{"row", (*rows)->where(i)}, {"reward", r}}.dump() << "\n";
    else
      out << (*rows)->where(i) << "  " << api::format_number(r) << "  "
          << excerpt((*requests)[i].response) << "\n";
  }
  const std::string& t = rl_job->spec.reward.type;
  const std::string type = !t.empty() ? t : plan.task.has_dataset() ? "math" : "the task's own";
  (as_json ? err : out) << "score: " << rewards->size() << " rows, reward " << type
                        << (rewards->empty()
                                ? ""
                                : ": mean " + api::format_number(sum / double(rewards->size())) +
                                      ", min " + api::format_number(lo) + ", max " +
                                      api::format_number(hi))
                        << "\n";
  return kExitOk;
}

}  // namespace tlt::cli
