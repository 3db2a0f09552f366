// Writing a file so that no reader, and no crash, ever sees half of it.
//
// atomic_write() writes into a temporary file beside `path` (same directory, so the rename
// stays on one filesystem), flushes it, optionally syncs it to the disk, and renames it over
// `path`. A reader opening `path` sees either the previous file or the complete new one.
// Every checkpoint, cache and report writer in tlt goes through here.
//
// Errors (Status, never exceptions):
//   - the callback's own non-OK Status is returned as it is;
//   - a callback that throws (std::exception, e.g. c10::Error) becomes kInternal naming `path`;
//   - an unwritable directory, a full disk or a failed sync is kUnavailable naming the file;
//   - a failed rename (e.g. `path` is a directory) is kUnavailable naming `path` and the reason.
//   On every error the temporary file is removed and `path` is left as it was.
//
// Thread safety: safe to call concurrently, from threads or processes, even for the same
// `path`: each call writes its own temporary name (path.tmp.<pid>.<serial>), and the last
// rename wins.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "api/status.h"

namespace tlt::io {

enum class Sync {
  kNone,  // survives a crash of this process (transient files: caches rebuilt on demand)
  kData,  // fsync before the rename: also survives a crash of the machine (checkpoints)
};

// Writes `path` through `write`, which gets a binary stream open on the temporary file (it may
// seek). Returns OK once the new file is in place.
Status atomic_write(const std::string& path, const std::function<Status(std::ostream&)>& write,
                    Sync sync = Sync::kData);

// Writes `bytes` as the whole content of `path`.
Status atomic_write(const std::string& path, std::string_view bytes, Sync sync = Sync::kData);

}  // namespace tlt::io
