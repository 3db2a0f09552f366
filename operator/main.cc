// `tlt-operator`: reconciles RLJob and TSTPretrainJob resources on a Kubernetes cluster.
//
// Runs the controller (operator/controller) against the apiserver of --kubeconfig, or of the
// pod's service account when none is given; serves /metrics, /healthz and /readyz on
// --metrics-port; with --leader-elect only the replica holding the Lease reconciles (/readyz: a
// standby is ready, the leader once its cache has synced; tlt_operator_leader says which leads).
// SIGTERM or
// SIGINT stops it (releasing the Lease). Its Kubernetes client retries transient apiserver
// failures and holds itself to --kube-qps / --kube-burst (kube/client.h). Also: --check
// (decode and validate manifests as the operator would), --print-crds / --write-crds (the CRDs
// generated from api/), --check-pod-security (judge pods at a Pod Security Standard level).
// --pod-security sets the level job pods are held to; --pod-policy-allow,
// --pod-policy-service-account and --pod-policy-priority-class loosen the admin rules beside it
// (operator/controller/pod_policy.h). While it reconciles
// (leads), the rebalancer (operator/rebalancer) runs too: it reads GPU utilisation from Prometheus
// (a job's spec.rebalancing.prometheusURL when --prometheus-url-allow lists it, else
// --prometheus-url) and assigns idle rollout pods to drafter training. --reward-url-allow lists
// the URLs an http reward (spec.reward.url) may name; a command reward with a container runs
// as a sidecar of the trainer pods (operator/controller/reward_sidecar.h). Each job gets a
// NetworkPolicy fencing its pods' ports unless --job-network-policy=false;
// --network-policy-metrics-from says which namespaces may scrape their metrics port
// (operator/controller/job_network.h). With --kueue a job labelled kueue.x-k8s.io/queue-name
// waits for Kueue to admit its Workload (operator/controller/kueue.h). --trainer-group-port is
// where an RLJob's trainer ranks form their group (operator/controller/desired.h).
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>

#include "api/manifest.h"
#include "api/schema.h"
#include "operator/controller/controller.h"
#include "operator/controller/leader.h"
#include "operator/controller/log.h"
#include "operator/controller/metrics.h"
#include "operator/controller/pod_security.h"
#include "kube/client.h"
#include "kube/cpprest_transport.h"
#include "kube/kubeconfig.h"
#include "operator/rebalancer/loop.h"
#include "operator/rebalancer/prometheus_client.h"

namespace {

// Writes the CRD of every kind: to `out` as one multi-document stream when `dir` is empty, else
// to DIR/<plural>.tlt.dev.yaml each. Returns the exit code.
int print_crds(const std::string& dir, std::ostream& out, std::ostream& err) {
  bool first = true;
  for (const std::string& kind : tlt::api::crd_kinds()) {
    tlt::StatusOr<std::string> yaml = tlt::api::crd_yaml(kind);
    if (!yaml.ok()) {
      err << "tlt-operator: " << yaml.status().to_string() << "\n";
      return 1;
    }
    if (dir.empty()) {
      out << (first ? "" : "---\n") << *yaml;
      first = false;
      continue;
    }
    std::string path = dir + "/" + tlt::api::crd_name(kind) + ".yaml";
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file << *yaml;
    file.close();
    if (!file) {
      err << "tlt-operator: cannot write " << path << "; does the directory exist?\n";
      return 1;
    }
    out << "wrote " << path << "\n";
  }
  return 0;
}

int check_manifests(const std::vector<std::string>& files) {
  int code = 0;
  for (const std::string& f : files) {
    auto docs = tlt::api::parse_manifest_file(f);
    if (!docs.ok()) {
      std::cerr << docs.status().message() << "\n";
      code = 1;
      continue;
    }
    for (const auto& d : *docs) {
      if (d.ok()) continue;
      code = 1;
      std::cerr << f << ":\n" << tlt::api::join_errors(d.errors) << "\n";
    }
  }
  return code;
}

// Reads Pods (JSON, one a line) from `in` and writes one verdict a line to `out`, as the
// operator's pod policy judges the pods at `level_name` (pod_security.h): "allow", or "deny" and
// a tab and every violation ("; "-separated); "error" and a tab and why for a line that is not
// JSON. Returns the exit code (1 for an unknown level or an unreadable line).
int check_pod_security(const std::string& level_name, std::istream& in, std::ostream& out) {
  using namespace tlt::controller;
  tlt::StatusOr<PodSecurityLevel> level = parse_pod_security_level(level_name);
  if (!level.ok()) {
    std::cerr << "tlt-operator: --check-pod-security: " << level.status().message() << "\n";
    return 1;
  }
  int code = 0;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json pod = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (pod.is_discarded()) {
      out << "error\tnot JSON\n";
      code = 1;
      continue;
    }
    std::string why;
    for (const PodSecurityViolation& v : check_pod_security(*level, pod, ""))
      why += (why.empty() ? "" : "; ") + describe(v, *level);
    out << (why.empty() ? "allow" : "deny\t" + why) << "\n";
  }
  return code;
}

struct RunFlags {
  std::string kubeconfig, context, service_account_dir, namespace_, runtime_image;
  std::string metrics_bind = "0.0.0.0";
  int metrics_port = 8080, workers = 2, watch_timeout = 120;
  int trainer_group_port = tlt::controller::kTrainerGroupPort;
  double qps = 20;
  int burst = 200;
  double kube_qps = 200;  // the Kubernetes client's own token bucket (kube/client.h)
  int kube_burst = 400;
  bool leader_elect = false;
  std::string lease_namespace = "default", lease_name = "tlt-operator", identity;
  int lease_seconds = 15;
  std::string prometheus_url;
  double prometheus_timeout = 5;
  std::vector<std::string> pod_policy_allow, pod_policy_service_accounts, prometheus_allow;
  std::vector<std::string> pod_policy_priority_classes;
  std::string pod_security = "restricted";
  std::vector<std::string> reward_allow;
  bool network_policy = true;
  std::vector<std::string> network_policy_metrics_from;
  bool kueue = false;
  int pods_pending_timeout = 300;
};

// glibc gives threads up to 8 malloc arenas per core. The operator's threads are short-lived
// (a leader renewal every 2 s runs on its own thread) or hand allocations to one another
// (cpprestsdk's pool threads, the watches, the workers), and each arena they touch keeps its
// freed pages, so RSS crept up while idle: +3.3 MiB in 7 minutes with a Lease held, measured
// with bench/operator_soak.sh's cluster, against +0.6 MiB with MALLOC_ARENA_MAX=2 (and +0.6
// MiB without --leader-elect). Two arenas, unless MALLOC_ARENA_MAX says otherwise; set before
// the first thread starts.
void limit_malloc_arenas() {
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
}

// Runs until SIGTERM/SIGINT or lost leadership. Returns the exit code.
int run(const RunFlags& flags) {
  using namespace tlt::controller;
  limit_malloc_arenas();
  // Signals are taken by sigwait() below, so every thread started from here on blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  tlt::StatusOr<tlt::kube::Credentials> creds =
      flags.kubeconfig.empty() ? tlt::kube::in_cluster_credentials(flags.service_account_dir)
                               : tlt::kube::load_kubeconfig(flags.kubeconfig, flags.context);
  if (!creds.ok()) {
    std::cerr << "tlt-operator: " << creds.status().to_string() << "\n";
    return 1;
  }
  tlt::kube::ClientOptions client_options;
  client_options.qps = flags.kube_qps;
  client_options.burst = flags.kube_burst;
  if (tlt::Status s = client_options.validate(); !s.ok()) {
    std::cerr << "tlt-operator: " << s.to_string() << "\n";
    return 1;
  }
  std::shared_ptr<tlt::kube::KubeClient> client =
      tlt::kube::make_client(tlt::kube::make_cpprest_transport(*creds), client_options);
  auto metrics = std::make_shared<OperatorMetrics>();

  ControllerOptions options;
  for (const std::string& rule : flags.pod_policy_allow) {
    if (tlt::Status s = options.pod.policy.allow(rule); !s.ok()) {
      std::cerr << "tlt-operator: " << s.message() << "\n";
      return 1;
    }
  }
  options.pod.policy.service_accounts = flags.pod_policy_service_accounts;
  options.pod.policy.priority_classes = flags.pod_policy_priority_classes;
  tlt::StatusOr<PodSecurityLevel> level = parse_pod_security_level(flags.pod_security);
  if (!level.ok()) {
    std::cerr << "tlt-operator: --pod-security: " << level.status().message() << "\n";
    return 1;
  }
  options.pod.policy.level = *level;
  options.pod.reward_url_allow = flags.reward_allow;
  options.pod.network_policy.enabled = flags.network_policy;
  for (const std::string& term : flags.network_policy_metrics_from) {
    if (tlt::Status s = options.pod.network_policy.add_metrics_from(term); !s.ok()) {
      std::cerr << "tlt-operator: " << s.message() << "\n";
      return 1;
    }
  }
  options.namespace_ = flags.namespace_;
  options.kueue = flags.kueue;
  options.pods_pending_timeout = std::chrono::seconds(flags.pods_pending_timeout);
  options.workers = flags.workers;
  options.pod.runtime_image = flags.runtime_image;
  options.pod.trainer_group_port = flags.trainer_group_port;
  options.rate.qps = flags.qps;
  options.rate.burst = flags.burst;
  options.watch_timeout_seconds = flags.watch_timeout;
  Controller controller(client, metrics, options);

  RealClock clock;
  auto prometheus = tlt::rebalancer::make_prometheus_client(
      std::chrono::milliseconds(static_cast<int64_t>(flags.prometheus_timeout * 1000)));
  tlt::rebalancer::RebalancerOptions ro;
  ro.namespace_ = flags.namespace_;
  ro.prometheus_url = flags.prometheus_url;
  ro.allowed_prometheus_urls = flags.prometheus_allow;
  tlt::rebalancer::RebalancerLoop rebalancer(std::make_unique<tlt::rebalancer::Rebalancer>(
      client.get(), &controller.cache(), prometheus.get(), &clock, metrics.get(), ro));

  std::atomic<bool> stop{false};
  HttpHandlers handlers;
  handlers.metrics = [metrics] { return metrics->render(); };
  handlers.healthy = [] { return true; };
  // A standby replica (--leader-elect, not holding the Lease) is ready: it is healthy and waiting
  // to take over. Were it not, a Deployment's RollingUpdate (maxUnavailable 0 with 2 replicas)
  // would wait forever for the new, standby pod, and `helm upgrade --wait` would time out.
  // Who leads is told by tlt_operator_leader on /metrics and by the Lease.
  std::atomic<bool> leading{false};
  handlers.not_ready = [&controller, &leading, &flags]() -> std::string {
    if (flags.leader_elect && !leading) return "";
    return controller.not_ready();
  };
  auto server = HttpServer::start(flags.metrics_bind, flags.metrics_port, handlers);
  if (!server.ok()) {
    std::cerr << "tlt-operator: " << server.status().to_string() << "\n";
    return 1;
  }
  log_info("Serving /metrics, /healthz and /readyz.",
           {{"address", flags.metrics_bind + ":" + std::to_string(flags.metrics_port)},
            {"apiserver", creds->server}});

  // The signal waiter sets `stop`; the main thread leads (or just runs) until then.
  std::thread([&stop, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    log_info("Stopping on a signal.", {{"signal", std::to_string(sig)}});
    stop = true;
  }).detach();

  if (flags.leader_elect) {
    LeaderOptions lo;
    lo.namespace_ = flags.lease_namespace;
    lo.name = flags.lease_name;
    lo.identity = flags.identity;
    lo.lease_duration = std::chrono::seconds(flags.lease_seconds);
    lo.renew_deadline = std::chrono::seconds(std::max(2, flags.lease_seconds * 2 / 3));
    if (lo.identity.empty()) {
      char host[256] = "";
      gethostname(host, sizeof host - 1);
      lo.identity = std::string(host) + "_" + std::to_string(getpid());
    }
    LeaderElector elector(client.get(), &clock, lo);
    if (elector.acquire(stop)) {
      metrics->set_leader(true);
      leading = true;
      controller.start();
      rebalancer.start();
      if (!elector.hold(stop)) {
        // Lost (or could not renew within the renew deadline, before the lease runs out):
        // report it and end at once, as client-go's leaders do; the pod is restarted and waits
        // as a candidate. Workers blocked on a partitioned apiserver are not waited for.
        metrics->set_leader(false);
        log_error("Stopped after losing leadership.", {{"leader", "0"}});
        std::cerr << std::flush;
        std::_Exit(1);
      }
      rebalancer.stop();
      metrics->set_leader(false);
    }
  } else {
    controller.start();
    rebalancer.start();
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  rebalancer.stop();
  controller.stop();
  log_info("Stopped.", {});
  // The watch threads may sit in a long poll; they hold only shared state, and the process ends
  // without waiting for them.
  std::cerr << std::flush;
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tlt-operator: reconciles RLJob and TSTPretrainJob resources"};
  RunFlags f;
  bool show_version = false, show_crds = false;
  std::string crd_dir;
  std::vector<std::string> check_files;
  app.add_option("--kubeconfig", f.kubeconfig,
                 "Kubeconfig file (default: the pod's service account, in-cluster)");
  app.add_option("--context", f.context, "Kubeconfig context (default: its current-context)");
  f.service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  app.add_option("--service-account-dir", f.service_account_dir,
                 "In-cluster: where the service account's token and ca.crt are")
      ->capture_default_str();
  app.add_option("--namespace", f.namespace_, "Watch only this namespace (default: all)");
  f.runtime_image = "ghcr.io/tlt-dev/tlt:latest";
  app.add_option("--runtime-image", f.runtime_image, "Image of the job pods' tlt container")
      ->capture_default_str();
  app.add_option("--trainer-group-port", f.trainer_group_port,
                 "Port of an RLJob's trainer group on its trainer pod 0 (TLT_TRAINER_GROUP_PORT; "
                 "not the rendezvous 29500 nor the weight-sync 29501)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535))
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            int port = std::atoi(v.c_str());
            return port == 29500 || port == 29501
                       ? "is the trainer pod's rendezvous (29500) or weight-sync (29501) port; "
                         "give another port"
                       : "";
          },
          "not 29500, 29501"));
  app.add_option("--metrics-port", f.metrics_port, "Port of /metrics, /healthz and /readyz")
      ->capture_default_str();
  app.add_option("--metrics-bind-address", f.metrics_bind, "IPv4 address to serve them on")
      ->capture_default_str();
  app.add_option("--workers", f.workers, "Jobs reconciled concurrently")->capture_default_str();
  app.add_option("--qps", f.qps, "Retries per second across all jobs (token bucket)")
      ->capture_default_str();
  app.add_option("--burst", f.burst, "Token bucket size")->capture_default_str();
  app.add_option("--kube-qps", f.kube_qps,
                 "Apiserver requests per second, all threads together (the Kubernetes client's "
                 "token bucket; watches do not count; 0: unlimited)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option(
         "--kube-burst", f.kube_burst,
         "Apiserver requests that may go at once before --kube-qps paces them (token bucket "
         "size)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--watch-timeout", f.watch_timeout, "Seconds before each watch is resumed")
      ->capture_default_str();
  app.add_flag("--leader-elect", f.leader_elect, "Elect one active replica with a Lease");
  app.add_option("--leader-election-namespace", f.lease_namespace, "Namespace of the Lease")
      ->capture_default_str();
  app.add_option("--leader-election-id", f.lease_name, "Name of the Lease")->capture_default_str();
  app.add_option("--leader-election-identity", f.identity,
                 "This replica's identity (default: hostname_pid)");
  app.add_option("--lease-duration", f.lease_seconds, "Seconds before an unrenewed Lease is taken")
      ->capture_default_str();
  app.add_option("--prometheus-url", f.prometheus_url,
                 "Prometheus base URL for the rebalancer's utilisation queries: the default for "
                 "RLJobs whose spec.rebalancing.prometheusURL is empty or not allowed");
  app.add_option("--prometheus-url-allow", f.prometheus_allow,
                 "A Prometheus base URL that a job's spec.rebalancing.prometheusURL may name "
                 "(it or a path below it; repeat or comma-separate; default: none, jobs' URLs "
                 "are never fetched)")
      ->delimiter(',');
  app.add_option("--prometheus-timeout", f.prometheus_timeout,
                 "Seconds one Prometheus query may take")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 300.0));
  app.add_option("--pod-security", f.pod_security,
                 "The Pod Security Standard every job pod must meet, checked before any is "
                 "created: restricted, baseline or privileged")
      ->capture_default_str()
      ->check(CLI::IsMember({"restricted", "baseline", "privileged"}));
  app.add_option("--reward-url-allow", f.reward_allow,
                 "A URL that a job's spec.reward.url (type http) may name (it or a path below "
                 "it; repeat or comma-separate; default: none, http rewards are refused)")
      ->delimiter(',');
  app.add_option("--pod-policy-allow", f.pod_policy_allow,
                 "Allow job podTemplates this (repeat or comma-separate): "
                 "automountServiceAccountToken, nodeName, controlPlaneTolerations (default: none)")
      ->delimiter(',');
  app.add_option("--pod-policy-service-account", f.pod_policy_service_accounts,
                 "A serviceAccountName job podTemplates may set (repeat or comma-separate; "
                 "default: none, the pods run as the job's own ServiceAccount)")
      ->delimiter(',');
  app.add_option("--pod-policy-priority-class", f.pod_policy_priority_classes,
                 "A priorityClassName job podTemplates may set (repeat or comma-separate; "
                 "default: none)")
      ->delimiter(',');
  app.add_option("--job-network-policy", f.network_policy,
                 "Give each job a NetworkPolicy: its pods accept connections only from the "
                 "job's own pods, and on the metrics port from --network-policy-metrics-from "
                 "(true or false)")
      ->capture_default_str();
  app.add_flag("--kueue", f.kueue,
               "Follow Kueue's job-framework contract: a job labelled kueue.x-k8s.io/queue-name "
               "runs only while Kueue admits its Workload (docs/kueue.md)");
  app.add_option("--pods-pending-timeout", f.pods_pending_timeout,
                 "Seconds a job pod may stay Pending before the job's condition PodsPending "
                 "names it and the scheduler's reason")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app.add_option("--network-policy-metrics-from", f.network_policy_metrics_from,
                 "A namespace label KEY=VALUE: pods in namespaces carrying all of them may reach "
                 "job pods' metrics port (repeat or comma-separate; default: every namespace)")
      ->delimiter(',');
  app.add_flag("--version", show_version, "Print the version and exit");
  app.add_option("--check", check_files, "Decode and validate manifests as the operator would");
  std::string check_level;
  app.add_option("--check-pod-security", check_level,
                 "Judge Pods (JSON, one a line on stdin) at this Pod Security Standard level, one "
                 "verdict a line (allow, or deny and the violations), and exit");
  app.add_flag("--print-crds", show_crds,
               "Print the CustomResourceDefinitions (generated from api/spec.h) and exit");
  app.add_option("--write-crds", crd_dir,
                 "Write each CRD to DIR/<plural>.tlt.dev.yaml (what crds/ holds) and exit");
  CLI11_PARSE(app, argc, argv);

  if (show_version) {
    std::cout << "tlt-operator " << TLT_VERSION << "\n";
    return 0;
  }
  if (show_crds || !crd_dir.empty()) return print_crds(crd_dir, std::cout, std::cerr);
  if (!check_files.empty()) return check_manifests(check_files);
  if (!check_level.empty()) return check_pod_security(check_level, std::cin, std::cout);
  return run(f);
}
