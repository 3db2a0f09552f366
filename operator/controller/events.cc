// Event recorders: written at once, or queued for background writers.
#include "operator/controller/events.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "operator/controller/log.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

void write_event(kube::KubeClient* client, const Json& event) {
  const Json& meta = event["metadata"];
  StatusOr<Json> out = client->create(event_resource(meta.value("namespace", "")), event);
  if (!out.ok()) {
    const Json& about = event["involvedObject"];
    log_error("Could not record an Event (the decision stands).",
              {{"kind", about.value("kind", "")},
               {"job", about.value("namespace", "") + "/" + about.value("name", "")},
               {"reason", event.value("reason", "")},
               {"error", out.status().to_string()}});
  }
}

}  // namespace

SyncEventRecorder::SyncEventRecorder(kube::KubeClient* client, const Clock* clock,
                                     std::string component)
    : client_(client), clock_(clock), component_(std::move(component)) {}

void SyncEventRecorder::record(const ObservedJob& job, const std::string& type,
                               const std::string& reason, const std::string& message) {
  write_event(client_,
              event_object(job, type, reason, message, component_, format_time(clock_->now())));
}

struct AsyncEventRecorder::State {
  std::shared_ptr<kube::KubeClient> client;
  size_t capacity = 0;
  std::mutex mu;
  std::condition_variable changed;
  std::deque<Json> queue;  // guarded by mu
  int writing = 0;         // events taken off the queue and not yet written; guarded by mu
  bool stopping = false;   // guarded by mu
};

namespace {

void writer_loop(std::shared_ptr<AsyncEventRecorder::State> s) {
  std::unique_lock<std::mutex> lock(s->mu);
  while (true) {
    s->changed.wait(lock, [&] { return s->stopping || !s->queue.empty(); });
    if (s->stopping) return;
    Json event = std::move(s->queue.front());
    s->queue.pop_front();
    ++s->writing;
    lock.unlock();
    write_event(s->client.get(), event);
    lock.lock();
    --s->writing;
    s->changed.notify_all();
  }
}

}  // namespace

AsyncEventRecorder::AsyncEventRecorder(std::shared_ptr<kube::KubeClient> client, const Clock* clock,
                                       std::string component, size_t capacity, int writers)
    : clock_(clock), component_(std::move(component)), state_(std::make_shared<State>()) {
  state_->client = std::move(client);
  state_->capacity = capacity;
  for (int i = 0; i < std::max(1, writers); ++i) std::thread(writer_loop, state_).detach();
}

AsyncEventRecorder::~AsyncEventRecorder() {
  shut_down(std::chrono::milliseconds(0));
}

void AsyncEventRecorder::record(const ObservedJob& job, const std::string& type,
                                const std::string& reason, const std::string& message) {
  Json e = event_object(job, type, reason, message, component_, format_time(clock_->now()));
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->stopping) return;
  if (state_->queue.size() >= state_->capacity) {
    log_error("Too many Events waiting to be written; dropped one.",
              {{"kind", job.kind},
               {"job", job.namespace_ + "/" + job.name},
               {"reason", reason},
               {"waiting", std::to_string(state_->queue.size())}});
    return;
  }
  state_->queue.push_back(std::move(e));
  state_->changed.notify_one();
}

void AsyncEventRecorder::shut_down(std::chrono::milliseconds drain) {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->changed.wait_for(lock, drain, [&] {
    return state_->stopping || (state_->queue.empty() && state_->writing == 0);
  });
  state_->stopping = true;
  state_->queue.clear();
  state_->changed.notify_all();
}

size_t AsyncEventRecorder::pending() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->queue.size() + static_cast<size_t>(state_->writing);
}

}  // namespace tlt::controller
