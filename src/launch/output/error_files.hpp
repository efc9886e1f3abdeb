// TORCHELASTIC_ERROR_FILE for each rank, as torchrun gives them: a Python
// program whose entry point has torch's @record writes its uncaught
// exception there as JSON, and mcirun puts it in the failure summary. The
// folder is made for the job and removed with it.
#pragma once

#include <optional>
#include <string>

namespace mci::launch {

class ErrorFiles {
 public:
  // A fresh folder under $TMPDIR (else /tmp) with one sub-folder per rank of
  // this node; throws std::system_error when none can be made.
  ErrorFiles(int first_rank, int nranks);
  ~ErrorFiles();
  ErrorFiles(const ErrorFiles&) = delete;
  ErrorFiles& operator=(const ErrorFiles&) = delete;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// Where rank's error file is under a job's folder (dir/rankR/error.json).
std::string error_file_path(const std::string& dir, int rank);

// The exception recorded in an error file ("RuntimeError: ..."), or nullopt
// when there is none or it is not torch's format.
std::optional<std::string> recorded_exception(const std::string& path);

}  // namespace mci::launch
