// A read-only memory map of a whole file: how GGUF and safetensors weights are read without a
// second copy in memory (pages come from the page cache and leave it when not needed).
//
// Ownership: the mapping lives as long as the MappedFile (move-only). Thread safety: the bytes
// are immutable; read them from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "api/status.h"

namespace tlt::model {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Maps `path`. NotFound when it does not exist; InvalidArgument when it is a directory;
  // Unavailable when it cannot be opened or mapped. An empty file maps to size() == 0.
  static StatusOr<MappedFile> open(const std::string& path);

  // Drops the whole pages of [begin, begin + n) from this process's memory (madvise DONTNEED):
  // a loader calls it once it has converted a tensor, so the file's pages do not add up in the
  // resident set beside the model. They are read again from the file if touched. No-op outside
  // the mapping.
  void release(const uint8_t* begin, size_t n) const;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;  // false for an empty file (nothing to unmap)
};

// The whole of a small file (a config.json). NotFound naming `path` when it cannot be opened.
StatusOr<std::string> read_text_file(const std::string& path);

}  // namespace tlt::model
