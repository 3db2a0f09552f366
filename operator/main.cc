// `tlt-operator`: reconciles RLJob and TSTPretrainJob resources on a Kubernetes cluster.
//
// This build has the command line, the shared job-spec API and the CRDs generated from it
// (--print-crds, --write-crds). The Kubernetes client (operator/kube) is built and tested but not
// wired in; the reconcilers and rebalancer are not built yet, and the binary says so instead of
// pretending.
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "api/manifest.h"
#include "api/schema.h"

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tlt-operator: reconciles RLJob and TSTPretrainJob resources"};
  std::string kubeconfig, metrics_address = ":8080", probe_address = ":8081";
  bool leader_elect = false, show_version = false, show_crds = false;
  std::string crd_dir;
  std::vector<std::string> check_files;
  app.add_option("--kubeconfig", kubeconfig, "Kubeconfig file (default: in-cluster)");
  app.add_option("--metrics-bind-address", metrics_address, "Address of /metrics");
  app.add_option("--health-probe-bind-address", probe_address, "Address of /healthz, /readyz");
  app.add_flag("--leader-elect", leader_elect, "Elect one active replica with a Lease");
  app.add_flag("--version", show_version, "Print the version and exit");
  app.add_option("--check", check_files, "Decode and validate manifests as the operator would");
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
  if (!check_files.empty()) {
    int code = 0;
    for (const std::string& f : check_files) {
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
  std::cerr << "tlt-operator: the Kubernetes client and reconcilers are not built yet; this "
               "binary only parses its flags and checks manifests (--check).\n";
  return 69;
}
