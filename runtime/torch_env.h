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

namespace tlt::runtime {

struct ComputeInfo {
  std::string torch_version;  // e.g. "1.13.1"
  bool cuda_available = false;
  int cuda_devices = 0;
  int intra_op_threads = 0;  // at::get_num_threads()
  int cores = 0;             // std::thread::hardware_concurrency()
};

// Sets LibTorch's intra-op threads and the BLAS/OpenMP thread variables to `threads`;
// 0 means one per core. Returns the number set.
int configure_threads(int threads);

ComputeInfo compute_info();

}  // namespace tlt::runtime
