#include "runtime/torch_env.h"

#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>

namespace tlt::runtime {
namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// Cores the cgroup v2 (else v1) CPU quota of this process's container allows; 0: no limit.
int quota_cores() {
  int v2 = cores_from_cpu_max(first_line("/sys/fs/cgroup/cpu.max"));
  if (v2 > 0) return v2;
  std::string quota = first_line("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  std::string period = first_line("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  if (quota.empty() || period.empty() || quota[0] == '-') return 0;
  return cores_from_cpu_max(quota + " " + period);
}

}  // namespace

void limit_openmp_spinning(char** argv) {
  if (env_set("OMP_WAIT_POLICY") || env_set("GOMP_SPINCOUNT") || env_set("TLT_NO_REEXEC")) return;
  setenv("GOMP_SPINCOUNT", kOpenMpSpinCount, /*overwrite=*/1);
  // The binary's own path, so the process keeps its name ("tlt", not "exe") in ps and top;
  // /proc/self/exe when that path is gone (the file was replaced while running).
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string path = n > 0 ? std::string(self, size_t(n)) : "";
  if (path.empty() || access(path.c_str(), X_OK) != 0) path = "/proc/self/exe";
  execv(path.c_str(), argv);
  unsetenv("GOMP_SPINCOUNT");  // not re-executed: libgomp keeps its defaults; say so truthfully
}

bool keep_freed_memory() {
  if (env_set("MALLOC_TRIM_THRESHOLD_") || env_set("MALLOC_MMAP_THRESHOLD_")) return false;
  constexpr int kLargestHeapBlock = 32 * 1024 * 1024;  // glibc's cap on M_MMAP_THRESHOLD (64-bit)
  bool trim = mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) == 1;
  bool mmap = mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock) == 1;
  return trim || mmap;
}

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) {
    int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int c = 0; c < n; ++c) cpus.push_back(c);
  }
  return cpus;
}

int cores_from_cpu_max(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  char* end = nullptr;
  double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || *end != '\0' || q <= 0) return 0;
  return std::max(1, static_cast<int>(std::ceil(q / period - 1e-9)));
}

int usable_cores() {
  int n = static_cast<int>(allowed_cpus().size());
  int quota = quota_cores();
  return quota > 0 ? std::min(n, quota) : n;
}

int configure_threads(int threads) {
  int n = threads > 0 ? threads : usable_cores();
  std::string value = std::to_string(n);
  // BLIS ignores at::set_num_threads; without these a 2-thread matmul runs at half speed.
  setenv("BLIS_NUM_THREADS", value.c_str(), /*overwrite=*/1);
  setenv("OMP_NUM_THREADS", value.c_str(), /*overwrite=*/1);
  at::set_num_threads(n);
  return n;
}

ComputeInfo compute_info() {
  ComputeInfo info;
  info.torch_version = TORCH_VERSION;
  info.cuda_available = torch::cuda::is_available();
  info.cuda_devices = info.cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
  info.intra_op_threads = at::get_num_threads();
  info.cores = usable_cores();
  if (env_set("OMP_WAIT_POLICY"))
    info.openmp_wait = std::string("OMP_WAIT_POLICY=") + std::getenv("OMP_WAIT_POLICY");
  else if (env_set("GOMP_SPINCOUNT"))
    info.openmp_wait = std::string("GOMP_SPINCOUNT=") + std::getenv("GOMP_SPINCOUNT");
  else
    info.openmp_wait = "default";
  return info;
}

}  // namespace tlt::runtime
