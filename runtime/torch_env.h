// The compute environment of a tlt process: LibTorch version, devices, and thread counts.
//
// On CPU a core plays the part of a GPU, so thread counts matter: LibTorch defaults to one
// thread on these machines, and BLIS reads its own variable (DESIGN.md section 7). Call
// configure_threads() once, early in main, before any tensor work.
//
// Thread safety: configure_threads() must run before other threads use LibTorch;
// compute_info() is safe from any thread.
#pragma once

#include <string>
#include <vector>

namespace tlt::runtime {

// libgomp's spin count that tlt runs with unless the user chose a wait policy: a waiting
// OpenMP thread spins about 10 us, then sleeps. With libgomp's default (300000 spins, about a
// millisecond), tlt processes sharing cores (a job's workers, two jobs on one machine) spend
// most of their time spinning on each other's cores; a short spin costs a process alone
// nothing measurable (docs/benchmarks.md, "Threads and memory", bench/openmp_wait.sh).
inline constexpr const char* kOpenMpSpinCount = "300";

struct ComputeInfo {
  std::string torch_version;  // e.g. "1.13.1"
  bool cuda_available = false;
  int cuda_devices = 0;
  int intra_op_threads = 0;  // at::get_num_threads()
  int cores = 0;             // usable_cores()
  std::string openmp_wait;   // "GOMP_SPINCOUNT=300", "OMP_WAIT_POLICY=passive", or "default"
};

// libgomp reads its wait policy once, when it is loaded, before main(). So when neither
// OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, this re-executes the program (its own path,
// the same argv) with GOMP_SPINCOUNT=kOpenMpSpinCount added; it returns only when the policy
// was already set or the exec failed (the run then goes on with libgomp's defaults). Call it
// first thing in main(), before any thread starts. TLT_NO_REEXEC=1 turns it off.
void limit_openmp_spinning(char** argv);

// Keeps memory the process frees for its own next allocations instead of handing it back to the
// kernel: glibc's heap is never trimmed below 2 GB of free top, and blocks of up to 32 MB (the
// most glibc allows) come from the heap rather than from their own mmap. An RL step frees and
// allocates the same activations every update; returned to the kernel, every page came back
// zeroed through a page fault, and on the micro preset TLT's updates, run after the drafter
// merge's allocations, took 5-10% longer than the baseline's identical ones (bench/rl_e2e.sh
// 20 3: 18.8-23.1 s vs 17.0-19.5 s; with this, 15.0-15.2 s vs 15.2-17.4 s). A process's
// resident memory then stays near its peak. Does nothing when MALLOC_TRIM_THRESHOLD_ or
// MALLOC_MMAP_THRESHOLD_ is set (the user's choice); returns whether it changed anything.
// Call it early in main, before large allocations.
bool keep_freed_memory();

// The CPUs this process may run on (its affinity mask), in increasing order; never empty.
std::vector<int> allowed_cpus();

// Cores a cgroup quota allows: `cpu_max` is cgroup v2's cpu.max line ("max 100000" or
// "150000 100000"); returns ceil(quota / period), or 0 when unlimited or unparsable.
int cores_from_cpu_max(const std::string& cpu_max);

// Cores this process can use: the affinity mask's size, capped by the cgroup's CPU quota (a
// pod's CPU limit). std::thread::hardware_concurrency() counts the node's CPUs instead, and
// that many spinning threads on a 2-core limit starve each other.
int usable_cores();

// Sets LibTorch's intra-op threads and the BLAS/OpenMP thread variables to `threads`;
// 0 means usable_cores(). Returns the number set.
int configure_threads(int threads);

ComputeInfo compute_info();

}  // namespace tlt::runtime
