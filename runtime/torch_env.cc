#include "runtime/torch_env.h"

#include <cstdlib>
#include <string>
#include <thread>

namespace tlt::runtime {

int configure_threads(int threads) {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  int n = threads > 0 ? threads : (cores > 0 ? cores : 1);
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
  info.cores = static_cast<int>(std::thread::hardware_concurrency());
  return info;
}

}  // namespace tlt::runtime
