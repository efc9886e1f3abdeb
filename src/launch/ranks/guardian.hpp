// What cleans up after mcirun when mcirun itself is killed (SIGKILL, the
// OOM killer). Its ranks die with it (PR_SET_PDEATHSIG), but not what they
// started (a data loader, a shell's children: they live in the rank's
// process group), nor mcirun's temporary folders.
//
// The guardian is a small process mcirun starts first, before any thread
// of its own (a double fork: it is nobody's child, so mcirun's waitpid(-1)
// as a subreaper never meets it). mcirun tells it, through a pipe, each
// process group and folder it makes and each it is done with. When the
// pipe closes without mcirun's goodbye, mcirun is gone: the guardian sends
// SIGKILL to those process groups (their leader, the rank, is dead
// already), removes those folders, and exits. With the goodbye it exits
// doing nothing. It sits in its own process group and ignores the stop
// signals: a Ctrl-C or SIGTERM meant for the job reaches mcirun, which
// then ends the job itself and says goodbye.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/socket.hpp"

namespace mci::launch {

class Guardian {
 public:
  // nullptr when it cannot be started (no pipe or fork): mcirun runs as
  // before, without one.
  static std::unique_ptr<Guardian> start();
  // Says goodbye: the guardian exits without touching anything.
  ~Guardian();
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  // A process group to end, and the one not to touch any more (its
  // processes are gone, so its id may be someone else's soon).
  void watch_group(pid_t pgid);
  void forget_group(pid_t pgid);
  // A folder to remove (with what it holds), and one that is removed.
  void watch_dir(const std::string& path);
  void forget_dir(const std::string& path);
  // A folder to remove only if empty (the flight-recorder dumps' own: a
  // dump written there is the user's).
  void watch_empty_dir(const std::string& path);

  explicit Guardian(Fd to_guardian) : pipe_(std::move(to_guardian)) {}

  // watch_dir for a scope: forget_dir when it ends (the folder's owner
  // removes it then).
  class WatchedDir {
   public:
    WatchedDir(Guardian* g, std::string path) : g_(g), path_(std::move(path)) {
      if (g_) g_->watch_dir(path_);
    }
    ~WatchedDir() {
      if (g_) g_->forget_dir(path_);
    }
    WatchedDir(const WatchedDir&) = delete;
    WatchedDir& operator=(const WatchedDir&) = delete;

   private:
    Guardian* g_;
    std::string path_;
  };

 private:
  void say(char what, const std::string& text);
  Fd pipe_;  // the write end
};

}  // namespace mci::launch
