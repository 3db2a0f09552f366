#include "runtime/tst/job_corpus.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "api/fnv.h"
#include "runtime/data/token_file.h"
#include "runtime/model/model_source.h"

namespace tlt::tst {
namespace {
namespace fs = std::filesystem;

// An identity of the file a Hugging Face tokenizer is read from (path, size, mtime).
std::string file_identity(const std::string& source) {
  std::error_code ec;
  fs::path file = source;
  if (fs::is_directory(file, ec)) file /= "tokenizer.json";
  if (file.filename() == "config.json") file = file.parent_path() / "tokenizer.json";
  fs::path canonical = fs::weakly_canonical(file, ec);
  auto size = fs::file_size(file, ec);
  auto mtime = fs::last_write_time(file, ec).time_since_epoch().count();
  return canonical.string() + ":" + std::to_string(size) + ":" + std::to_string(mtime);
}

// Cache key of a corpus + tokenizer + split: the same inputs give the same files.
std::string corpus_key(const api::TSTPretrainJobSpec& spec, const DataTokenizer& tok) {
  std::string key = spec.data.corpus;
  if (spec.data.corpus == "files") {
    uint64_t h = fnv1a64("");
    for (const std::string& p : spec.data.paths) h = fnv1a64(p, h);
    key += "-" + std::to_string(h % 1000000007ull);
  }
  char frac[32];
  std::snprintf(frac, sizeof frac, "%g", spec.data.held_out_fraction);
  if (tok.hf) return key + "-hf" + std::to_string(fnv1a64(file_identity(tok.path)) % 1000000007ull);
  return key + "-bpe" + std::to_string(spec.data.tokenizer.vocab_size) + "-h" + frac;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The tokenized corpus (tokenized_corpus_file), read.
StatusOr<data::TokenizedCorpus> tokenized_corpus(const api::TSTPretrainJobSpec& spec,
                                                 std::ostream& out) {
  StatusOr<std::string> file = tokenized_corpus_file(spec, out);
  if (!file.ok()) return file.status();
  return data::read_token_file(*file);
}

}  // namespace

StatusOr<DataTokenizer> data_tokenizer(const api::TSTPretrainJobSpec& spec) {
  const std::string& given = spec.data.tokenizer.path;
  if (!given.empty()) return DataTokenizer{given, ends_with(given, ".json")};
  if (spec.model.path.empty()) return DataTokenizer{};
  StatusOr<model::ModelSource> source =
      model::resolve_model_source(spec.model.path, spec.model.format);
  if (!source.ok()) return source.status().with_context("spec.model.path");
  StatusOr<std::string> own = model::model_tokenizer_source(*source);
  if (!own.ok()) return own.status().with_context("spec.model.path");
  if (own->empty() && source->kind == model::SourceKind::kGguf) {
    return Status::InvalidArgument("spec.model.path: " + spec.model.path +
                                   " carries no tokenizer (no tokenizer.ggml.* metadata); set "
                                   "spec.data.tokenizer.path to the model's tokenizer.json");
  }
  return DataTokenizer{*own, !own->empty()};
}

StatusOr<std::string> tokenized_corpus_file(const api::TSTPretrainJobSpec& spec,
                                            std::ostream& out) {
  StatusOr<DataTokenizer> tok = data_tokenizer(spec);
  if (!tok.ok()) return tok.status();
  std::string key = corpus_key(spec, *tok);
  std::string tokens = data::cache_root() + "/corpora/" + key + ".tokens";
  std::string tokenizer =
      tok->path.empty() ? data::cache_root() + "/tokenizers/" + key + ".model" : tok->path;
  std::error_code ec;
  if (!fs::exists(tokens, ec)) {
    fs::create_directories(fs::path(tokens).parent_path(), ec);
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    fs::path tool = self.parent_path() / "tlt-data";
    std::string cmd = "'" + tool.string() + "' tokenize --corpus " + spec.data.corpus +
                      " --vocab " + std::to_string(spec.data.tokenizer.vocab_size) +
                      " --held-out " + std::to_string(spec.data.held_out_fraction) +
                      (tok->hf ? " --hf-tokenizer '" : " --tokenizer '") + tokenizer + "' --out '" +
                      tokens + "'";
    for (const std::string& p : spec.data.paths) cmd += " --paths '" + p + "'";
    out << "tlt: tokenizing the corpus once (cached in " << tokens << ")\n" << std::flush;
    if (std::system(cmd.c_str()) != 0) {
      return Status::Unavailable("tokenizing failed: " + cmd);
    }
  }
  return tokens;
}

StatusOr<JobDocuments> job_documents(const api::TSTPretrainJobSpec& spec, std::ostream& out) {
  StatusOr<data::TokenizedCorpus> corpus = tokenized_corpus(spec, out);
  if (!corpus.ok()) return corpus.status();
  JobDocuments d;
  d.vocab = corpus->vocab;
  int64_t train_tokens = 0;
  for (data::TokenizedDocument& doc : corpus->docs) {
    bool held = data::held_out_by_name(doc.name, spec.data.held_out_fraction);
    if (!held) train_tokens += int64_t(doc.ids.size());
    (held ? d.held_out : d.train).push_back(std::move(doc.ids));
  }
  if (d.held_out.empty()) {
    std::ostringstream m;
    m << "spec.data.heldOutFraction " << spec.data.held_out_fraction << " holds out no document of "
      << corpus->docs.size() << "; raise it";
    return Status::InvalidArgument(m.str());
  }
  out << "tlt run: corpus " << spec.data.corpus << ": " << d.train.size() << " training ("
      << train_tokens << " tokens) and " << d.held_out.size() << " held-out documents, vocab "
      << d.vocab << "\n";
  return d;
}

}  // namespace tlt::tst
