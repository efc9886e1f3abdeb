// A writer of Python pickles (protocol 2), enough for torch's flight-recorder
// dump: None, bool, int, float, str, and nested list, tuple and dict. Torch
// writes its dump as a pickle and torchfrtrace loads it with pickle.load, so
// mci's dump must be one too; no memo is written (each value once).
//
//   PickleWriter w;
//   w.begin_dict();
//   w.str("version"); w.str("2.10");
//   w.end();
//   std::string bytes = w.finish();
//
// Containers are opened with begin_*() and closed with end(); a dict takes
// key, value, key, value... Misuse (end() with nothing open, finish() with a
// container open or other than one value written, a dict left with a key but
// no value) throws std::logic_error: a bug in mci, never a user's error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mci::diag {

class PickleWriter {
 public:
  PickleWriter();  // writes the protocol header

  void none();
  void boolean(bool v);
  void integer(std::int64_t v);
  void real(double v);
  void str(std::string_view utf8);

  void begin_list();
  void begin_tuple();
  void begin_dict();
  void end();

  // The pickle's bytes (STOP appended); the writer is then spent.
  std::string finish();

 private:
  enum class Kind : std::uint8_t { list, tuple, dict };
  struct Open {
    Kind kind;
    std::size_t mark;        // where its MARK is in out_
    std::size_t values = 0;  // written into it so far (a dict's keys count)
  };
  void value_written();
  void open(Kind kind, char empty_op);
  void put(char op) { out_.push_back(op); }
  void put_le(std::uint64_t v, int bytes);

  std::string out_;
  std::vector<Open> open_;
  std::size_t top_values_ = 0;  // a pickle holds exactly one
  bool finished_ = false;
};

}  // namespace mci::diag
