#include "core/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

namespace ditto {
namespace {

constexpr double kRedrawSeconds = 0.25;
constexpr size_t kBarWidth = 20;

// The terminal's width in columns (80 when it does not say): a line longer than the terminal
// wraps, and '\r' then returns only to the start of its last piece.
size_t stderr_columns() {
  winsize w{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

}  // namespace

ProgressSink stderr_progress_sink(bool quiet) {
  ProgressSink sink;
  sink.is_terminal = !quiet && isatty(STDERR_FILENO) == 1;
  sink.write = [](std::string_view s) {
    std::fwrite(s.data(), 1, s.size(), stderr);
    std::fflush(stderr);
  };
  sink.now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  return sink;
}

namespace {
std::atomic<bool> progress_bars_on{false};
}  // namespace

void enable_progress_bars(bool on) { progress_bars_on.store(on); }
bool progress_bars_enabled() { return progress_bars_on.load(); }
ProgressSink library_progress_sink() { return stderr_progress_sink(!progress_bars_enabled()); }

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  }
  return buf;
}

ProgressBar::ProgressBar(std::string title, int64_t total, std::string unit, ProgressSink sink)
    : title_(std::move(title)), total_(total), unit_(std::move(unit)), sink_(std::move(sink)) {
  if (!sink_.now) sink_.now = stderr_progress_sink(true).now;
  start_ = sink_.now();
}

ProgressBar::~ProgressBar() { finish(); }

double ProgressBar::elapsed() const { return sink_.now() - start_; }

void ProgressBar::update(int64_t done, std::string_view detail, double fraction) {
  if (finished_) return;
  if (fraction < 0) fraction = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 0.0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const double t = elapsed();
  eta_ = fraction > 0 ? t * (1.0 - fraction) / fraction : -1.0;
  if (!sink_.is_terminal || !sink_.write || t < show_after_) return;
  const double now = sink_.now();
  if (last_draw_ >= 0 && now - last_draw_ < kRedrawSeconds && fraction < 1.0) return;
  last_draw_ = now;
  draw(done, detail, fraction);
}

void ProgressBar::draw(int64_t done, std::string_view detail, double fraction) {
  // Appended piece by piece: GCC 12's -Wrestrict misfires on "literal" + std::string temporaries.
  const auto filled = static_cast<size_t>(fraction * kBarWidth);
  std::string line = title_;
  line += " [";
  line.append(filled, '#');
  line.append(kBarWidth - filled, '.');
  line += "] ";
  line += std::to_string(done);
  if (total_ > 0) {
    line += '/';
    line += std::to_string(total_);
  }
  line += ' ';
  line += unit_;
  line += ", ";
  line += format_duration(elapsed());
  if (eta_ >= 0) {
    line += ", ~";
    line += format_duration(eta_);
    line += " left";
  }
  if (!detail.empty()) {
    line += ": ";
    line += detail;
  }
  const size_t width = (sink_.columns > 0 ? sink_.columns : stderr_columns()) - 1;  // the last column wraps
  if (line.size() > width) line.resize(width);
  const size_t pad = drawn_width_ > line.size() ? drawn_width_ - line.size() : 0;
  drawn_width_ = std::max(drawn_width_, line.size());
  line.append(pad, ' ');
  line.insert(line.begin(), '\r');
  sink_.write(line);
}

void ProgressBar::note(std::string_view line) {
  if (finished_ || !sink_.is_terminal || !sink_.write) return;
  std::string out = "\r";
  out.append(drawn_width_, ' ');
  out += '\r';
  out += line;
  out += '\n';
  sink_.write(out);
  drawn_width_ = 0;
  last_draw_ = -1.0;  // the next update redraws the bar below the note
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (!sink_.is_terminal || !sink_.write || drawn_width_ == 0) return;
  std::string out = "\r";
  out.append(drawn_width_, ' ');
  out += '\r';
  sink_.write(out);
}

}  // namespace ditto
