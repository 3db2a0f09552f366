// Precompiled header of the LibTorch targets: parsing <torch/torch.h> costs 20-25 s and
// ~1.3 GB per file (DESIGN.md section 7), so it is parsed once per target.
#pragma once
#include <torch/torch.h>
