#include "runtime/model/config.h"

namespace tlt::model {

int64_t ModelConfig::parameter_count() const {
  int64_t d = head_dim();
  int64_t attn = dim * (n_heads * d) + 2 * dim * (n_kv_heads * d) + (n_heads * d) * dim;
  if (qkv_bias) attn += (n_heads + 2 * n_kv_heads) * d;
  int64_t mlp = 3 * dim * ffn;
  int64_t norms = 2 * dim;
  return 2 * vocab * dim + n_layers * (attn + mlp + norms) + dim;
}

Status ModelConfig::validate() const {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("model." + field + ": " + why);
  };
  if (vocab < 2) return bad("vocab", "must be >= 2 (got " + std::to_string(vocab) + ")");
  if (dim < 1 || n_heads < 1 || n_kv_heads < 1 || n_layers < 1 || ffn < 1) {
    return bad("dim", "dim, heads, layers and ffn must all be >= 1");
  }
  if (n_head_dim < 0) return bad("n_head_dim", "must be >= 0 (0: dim / n_heads)");
  if (n_head_dim == 0 && dim % n_heads != 0) {
    return bad("n_heads", "must divide dim (" + std::to_string(dim) + " % " +
                              std::to_string(n_heads) + " != 0)");
  }
  if (n_heads % n_kv_heads != 0) {
    return bad("n_kv_heads", "must divide n_heads (" + std::to_string(n_heads) + " % " +
                                 std::to_string(n_kv_heads) + " != 0)");
  }
  if (head_dim() % 2 != 0) return bad("dim", "the head dimension must be even for RoPE");
  if (max_seq < 2) return bad("max_seq", "must be >= 2");
  return Status::Ok();
}

StatusOr<ModelConfig> preset_config(const std::string& name, int64_t vocab) {
  ModelConfig c;
  if (name == "micro") {
    c.dim = 128, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn = 384;
  } else if (name == "tiny") {
    c.dim = 192, c.n_layers = 4, c.n_heads = 6, c.n_kv_heads = 2, c.ffn = 512;
  } else if (name == "small") {
    c.dim = 512, c.n_layers = 8, c.n_heads = 8, c.n_kv_heads = 4, c.ffn = 1408;
  } else {
    return Status::NotFound("unknown model preset \"" + name + "\"; use micro, tiny or small");
  }
  if (vocab > 0) c.vocab = vocab;
  TLT_RETURN_IF_ERROR(c.validate());
  return c;
}

}  // namespace tlt::model
