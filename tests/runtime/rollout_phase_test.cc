// The rollout phase (runtime/rl/rollout_phase.h) against a worker process that answers with a
// `generated` reply naming a request id far outside the step's (the crash of issue 51: the driver
// wrote responses[100000]): the reply is refused with the field named, the worker is killed and
// restarted like a dead one, and its requests are answered by the restarted worker; a worker that
// keeps sending such replies ends the step with an error after kMaxRestartsPerStep restarts.
// The worker is a small Python program speaking the channel's newline-delimited JSON.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/rl/rollout_phase.h"
#include "runtime/rl/tasks.h"
#include "runtime/rl/text.h"
#include "runtime/rl/worker_pool.h"

namespace tlt::rl {
namespace {

namespace fs = std::filesystem;

// A worker that answers each generate message: its first answer in `dir` (or every answer with
// `always`) names request 100000 instead of its first request; the others answer each request
// with the tokens "AB".
std::string write_hostile_worker(const std::string& dir, bool always) {
  const std::string path = dir + "/hostile-worker.py";
  std::ofstream f(path);
  f << "#!/usr/bin/python3\n"
       "import json, os, sys\n"
       "ALWAYS = "
    << (always ? "True" : "False")
    << "\n"
       "MARK = '"
    << dir
    << "/hostile-fired'\n"
       "for line in sys.stdin:\n"
       "    m = json.loads(line)\n"
       "    if m.get('op') != 'generate':\n"
       "        continue\n"
       "    ids = [r['id'] for r in m['requests']]\n"
       "    hostile = ALWAYS or not os.path.exists(MARK)\n"
       "    open(MARK, 'w').close()\n"
       "    comps = [{'id': i, 'tokens': [65, 66], 'stopped': False} for i in ids]\n"
       "    if hostile:\n"
       "        comps[0]['id'] = 100000\n"
       "    out = {'op': 'generated', 'step': m['step'], 'worker': 0,\n"
       "           'policy_version': m['policy_version'], 'completions': comps,\n"
       "           'stats': {'tokens': 2 * len(ids), 'request_spec_steps': 0, 'accepted': 0,\n"
       "                     'arms': {}}}\n"
       "    sys.stdout.write(json.dumps(out) + '\\n')\n"
       "    sys.stdout.flush()\n";
  f.close();
  ::chmod(path.c_str(), 0755);
  return path;
}

struct HostileRun {
  std::string dir;
  RLRunPlan plan;
  std::vector<std::string> logs;
  RunCallbacks cb;

  explicit HostileRun(bool always) {
    // The driver writes to workers it has killed: the pool's contract is that SIGPIPE is ignored
    // (as `tlt` does), and ctest runs this test in a process of its own.
    ::signal(SIGPIPE, SIG_IGN);
    char tmpl[] = "/tmp/tlt-rollout-phase-XXXXXX";
    dir = mkdtemp(tmpl);
    fs::create_directories(dir + "/buffer");
    plan.workers = 1, plan.algorithm.prompts_per_step = 1, plan.algorithm.group_size = 2;
    plan.algorithm.max_response_tokens = 8, plan.baseline = true, plan.run_dir = dir;
    plan.worker_exe = write_hostile_worker(dir, always);
    cb.log = [this](const std::string& m) { logs.push_back(m); };
  }
  ~HostileRun() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // Step 1's rollout phase with one worker process.
  StatusOr<Rollouts> run(StepReport* r) {
    StatusOr<std::unique_ptr<Task>> task = make_task("arithmetic-cot", 1);
    if (!task.ok()) return task.status();
    WorkerPoolOptions po;
    po.workers = 1, po.rollout_workers = 1, po.worker_exe = plan.worker_exe, po.run_dir = dir;
    WorkerPool pool(
        po,
        [](int) {
          return nlohmann::json{{"op", "setup"}};
        },
        [this](const std::string& m) { logs.push_back(m); });
    Status started = pool.start(1);
    if (!started.ok()) return started;
    RolloutPhase phase(plan, cb, nullptr, pool, **task, ascii_codec(), 256);
    StatusOr<Rollouts> out = phase.run(1, 0, r);
    pool.shutdown();
    return out;
  }
  bool logged(const std::string& text) const {
    for (const std::string& l : logs)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }
};

TEST(RolloutPhase, GeneratedWithAnIdOutsideTheStepIsRefusedAndTheWorkerRestarted) {
  HostileRun h(/*always=*/false);
  StepReport r;
  StatusOr<Rollouts> out = h.run(&r);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(r.restarts, 1);
  EXPECT_TRUE(h.logged("refused worker 0's generated (step 1): completions[0].id is 100000"));
  ASSERT_EQ(out->responses.size(), 2u);
  for (const std::vector<int64_t>& resp : out->responses)
    EXPECT_EQ(resp, (std::vector<int64_t>{65, 66}));  // the restarted worker's answers
}

TEST(RolloutPhase, WorkerThatKeepsSendingRefusedRepliesEndsTheStepWithAnError) {
  HostileRun h(/*always=*/true);
  StepReport r;
  StatusOr<Rollouts> out = h.run(&r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(out.status().message().find("rollout worker 0 failed 4 times in step 1"),
            std::string::npos)
      << out.status().message();
  EXPECT_EQ(r.restarts, RolloutPhase::kMaxRestartsPerStep);
}

}  // namespace
}  // namespace tlt::rl
