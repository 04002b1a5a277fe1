// A one-line progress bar for long work (check-invariance, model loading, export-gguf, bench, a
// long prefill): what is done of the total, the time elapsed and an estimate of the time left,
// e.g. "check-invariance [#####...............] 5/19 rows, 0:42, ~2:10 left: shuffled order",
// redrawn in place with '\r' at most a few times per second. It draws nothing unless its sink is a
// terminal — a command whose stderr is a pipe or a file, or that got --quiet, prints exactly what
// it printed before — and never writes to stdout.
// Thread-safety: none; one thread updates a bar.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace ditto {

// Where a bar draws, and whether it draws at all; injected so tests can watch a "terminal".
struct ProgressSink {
  bool is_terminal = false;                     // false: the bar draws nothing
  std::function<void(std::string_view)> write;  // the bytes of one redraw
  std::function<double()> now;                  // seconds on a monotonic clock
  size_t columns = 0;                           // the terminal's width; 0: ask stderr's terminal
};

// stderr when it is a terminal (isatty) and `quiet` is false; otherwise a sink that draws nothing.
ProgressSink stderr_progress_sink(bool quiet);

// Whether the library's own bars (model loading, export-gguf's tensors, bench's runs) may draw:
// off unless a program turns them on — the ditto command line does, and a command's --quiet turns
// them off again — so a program embedding ditto (the Python package, a server's ranks) sees none.
// Thread-safe (an atomic flag).
void enable_progress_bars(bool on);
bool progress_bars_enabled();
// stderr_progress_sink(!progress_bars_enabled()).
ProgressSink library_progress_sink();

// "1:05" (minutes:seconds) or "2:03:04" for hours; negative or not finite: "?".
std::string format_duration(double seconds);

class ProgressBar {
 public:
  // `title` leads the line ("check-invariance"); `total` units make the whole work, each called
  // `unit` ("rows", "tensors"); total 0 means unknown (no bar, no estimate until set_total).
  ProgressBar(std::string title, int64_t total, std::string unit, ProgressSink sink);
  ~ProgressBar();  // finish()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` of the total units; `detail` (the current row, tensor, ...) ends the line. `fraction`
  // in [0, 1], when given, is the share of the work done — the bar and the estimate of the time
  // left follow it rather than done / total, for units of unequal cost. Redraws at most every
  // 0.25 s, and always when the work is complete.
  void update(int64_t done, std::string_view detail = {}, double fraction = -1.0);
  void set_total(int64_t total) { total_ = total; }
  // Draws nothing until `seconds` have passed (short work stays silent).
  void show_after(double seconds) { show_after_ = seconds; }
  // `line` on a line of its own above the bar (an estimate, a notice); nothing unless on a terminal.
  void note(std::string_view line);
  // Clears the line (the caller's next output starts on a clean line); later updates draw nothing.
  void finish();

  // Seconds since construction, and the estimate of the time left (negative: none yet) as of the
  // last update.
  double elapsed() const;
  double eta() const { return eta_; }

 private:
  void draw(int64_t done, std::string_view detail, double fraction);

  std::string title_;
  int64_t total_;
  std::string unit_;
  ProgressSink sink_;
  double start_ = 0.0;
  double last_draw_ = -1.0;
  double show_after_ = 0.0;
  double eta_ = -1.0;
  size_t drawn_width_ = 0;  // the longest line drawn, blanked by finish()
  bool finished_ = false;
};

}  // namespace ditto
