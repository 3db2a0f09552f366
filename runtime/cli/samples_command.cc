// `tlt samples DIR`: an RL run's scored responses (samples.jsonl, runtime/rl/samples.h), readably
// (commands.h).
#include <algorithm>
#include <filesystem>
#include <ostream>

#include "api/validate.h"
#include "runtime/cli/commands.h"
#include "runtime/rl/samples.h"

namespace tlt::cli {
namespace {
namespace fs = std::filesystem;

constexpr size_t kWidth = 100;  // columns of a wrapped line, its label included
constexpr const char* kIndent = "            | ";

// The byte offset at most `width` bytes into `line` where it breaks: after the last space that
// fits, else at `width` (never inside a UTF-8 sequence).
size_t break_at(const std::string& line, size_t width) {
  if (line.size() <= width) return line.size();
  size_t space = line.rfind(' ', width);
  if (space != std::string::npos && space > width / 2) return space + 1;
  size_t at = width;
  while (at > 1 && (static_cast<unsigned char>(line[at]) & 0xC0) == 0x80) --at;
  return at;
}

// `text` under `label`, its lines kept and each wrapped to the width.
void print_wrapped(std::ostream& out, const std::string& label, const std::string& text) {
  const std::string indent = kIndent;
  const size_t width = kWidth - indent.size();
  std::string head = "  " + label;
  head.resize(indent.size() - 2, ' ');
  head += "| ";
  bool first = true;
  size_t start = 0;
  do {
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end == std::string::npos ? end : end - start);
    do {
      size_t cut = break_at(line, width);
      out << (first ? head : indent) << line.substr(0, cut) << "\n";
      first = false;
      line.erase(0, cut);
    } while (!line.empty());
    start = end == std::string::npos ? text.size() + 1 : end + 1;
  } while (start <= text.size());
}

void print_row(std::ostream& out, const rl::SampleRow& r) {
  out << "step " << r.step << "  " << r.phase << "  " << r.id;
  if (!r.problem.empty()) out << "  (" << r.problem << ")";
  out << "  reward " << api::format_number(r.reward) << "  " << r.tokens << " tokens"
      << (r.finish.empty() ? "" : ", " + r.finish) << "\n";
  print_wrapped(out, "prompt", r.prompt);
  print_wrapped(out, "answer",
                r.answer.is_string()
                    ? r.answer.get<std::string>()
                    : r.answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (!r.fields.is_null())
    print_wrapped(out, "fields",
                  r.fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  print_wrapped(out, "response", r.response);
  out << "\n";
}

// The samples file of `dir_or_file`: the file itself, or DIR/samples.jsonl. NotFound naming the
// other samples files of DIR (another run's) when it has no samples.jsonl.
StatusOr<std::string> samples_file(const std::string& dir_or_file) {
  std::error_code ec;
  if (!fs::is_directory(dir_or_file, ec)) {
    if (fs::exists(dir_or_file, ec)) return dir_or_file;
    return Status::NotFound(dir_or_file +
                            ": no such file or directory (give a job's report directory or a "
                            "samples.jsonl)");
  }
  fs::path file = fs::path(dir_or_file) / rl::kSamplesFile;
  if (fs::exists(file, ec)) return file.string();
  std::string others;
  for (const auto& e : fs::directory_iterator(dir_or_file, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("samples-", 0) == 0 && e.path().extension() == ".jsonl")
      others += (others.empty() ? "" : ", ") + e.path().string();
  }
  if (!others.empty())
    return Status::NotFound(file.string() + " does not exist; give one of " + others);
  return Status::NotFound(file.string() +
                          " does not exist (an RL run writes it unless spec.report.samples is 0)");
}

}  // namespace

int samples_command(const SamplesFlags& flags, std::ostream& out, std::ostream& err) {
  StatusOr<std::string> file = samples_file(flags.dir);
  if (!file.ok()) {
    err << "tlt samples: " << file.status().message() << "\n";
    return kExitInvalid;
  }
  StatusOr<std::vector<rl::SampleRow>> rows = rl::read_samples(*file);
  if (!rows.ok()) {
    err << "tlt samples: " << rows.status().message() << "\n";
    return kExitInvalid;
  }
  std::vector<rl::SampleRow> shown;
  for (rl::SampleRow& r : *rows)
    if ((flags.step < 0 || r.step == flags.step) && (flags.phase.empty() || r.phase == flags.phase))
      shown.push_back(std::move(r));
  const size_t matched = shown.size();
  if (flags.worst > 0) {
    std::stable_sort(
        shown.begin(), shown.end(),
        [](const rl::SampleRow& a, const rl::SampleRow& b) { return a.reward < b.reward; });
    shown.resize(std::min(shown.size(), size_t(flags.worst)));
  }
  double sum = 0;
  for (const rl::SampleRow& r : shown) {
    print_row(out, r);
    sum += r.reward;
  }
  out << "samples: " << shown.size() << " shown";
  if (flags.worst > 0) out << " (the lowest rewards of " << matched << ")";
  out << " of " << rows->size() << " rows in " << *file;
  if (!shown.empty()) out << "; mean reward " << api::format_number(sum / double(shown.size()));
  out << "\n";
  return kExitOk;
}

}  // namespace tlt::cli
