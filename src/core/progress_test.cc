#include "core/progress.h"

#include <gtest/gtest.h>

#include <string>

namespace ditto {
namespace {

// A sink that records what a bar draws, on a clock the test moves.
struct FakeTerminal {
  std::string out;
  double t = 100.0;
  ProgressSink sink(bool is_terminal) {
    ProgressSink s;
    s.is_terminal = is_terminal;
    s.write = [this](std::string_view bytes) { out += bytes; };
    s.now = [this] { return t; };
    s.columns = 120;
    return s;
  }
};

TEST(ProgressTest, DrawsInPlaceOnATerminalAndClearsAtTheEnd) {
  FakeTerminal term;
  {
    ProgressBar bar("check-invariance", 4, "rows", term.sink(true));
    term.t += 10;
    bar.update(1, "batch of 1 vs all");
    EXPECT_NE(term.out.find("\rcheck-invariance [#####...............] 1/4 rows, 0:10, ~0:30 left: batch of 1 vs all"),
              std::string::npos)
        << term.out;
    EXPECT_NE(term.out.find("batch of 1 vs all"), std::string::npos);
    EXPECT_EQ(term.out.find('\n'), std::string::npos);  // in place: no new lines
  }
  // The destructor blanked the line and returned to its start.
  EXPECT_EQ(term.out.back(), '\r');
  EXPECT_NE(term.out.rfind("\r      "), std::string::npos);
}

TEST(ProgressTest, DrawsNothingWhenNotATerminal) {
  FakeTerminal term;
  ProgressBar bar("export-gguf", 3, "tensors", term.sink(false));
  for (int i = 1; i <= 3; ++i) {
    term.t += 1;
    bar.update(i, "blk.0");
  }
  bar.finish();
  EXPECT_EQ(term.out, "");
  EXPECT_NEAR(bar.eta(), 0.0, 1e-9);  // it still keeps time: the caller may read the estimate
}

TEST(ProgressTest, RedrawsAtMostFourTimesASecondButAlwaysTheLastStep) {
  FakeTerminal term;
  ProgressBar bar("bench", 1000, "iterations", term.sink(true));
  for (int i = 1; i <= 1000; ++i) {
    term.t += 0.001;  // a thousand updates in one second
    bar.update(i);
  }
  size_t draws = 0;
  for (char c : term.out) draws += c == '\r';
  EXPECT_LE(draws, 6u);
  EXPECT_NE(term.out.find("1000/1000 iterations"), std::string::npos) << term.out;
}

TEST(ProgressTest, EstimateFollowsTheFractionOfWorkDone) {
  FakeTerminal term;
  ProgressBar bar("check-invariance", 19, "rows", term.sink(true));
  EXPECT_LT(bar.eta(), 0);  // nothing done: no estimate
  term.t += 30;
  bar.update(1, "alone", 0.25);  // one row of 19, but a quarter of the work: 90 s left, not 540
  EXPECT_NEAR(bar.eta(), 90.0, 1e-9);
  term.t += 30;
  bar.update(2, "", 0.5);
  EXPECT_NEAR(bar.eta(), 60.0, 1e-9);
  bar.update(2, "", 1.5);  // clamped: done
  EXPECT_NEAR(bar.eta(), 0.0, 1e-9);
}

TEST(ProgressTest, LongDetailIsCutToTheTerminalWidth) {
  FakeTerminal term;
  ProgressBar bar("load", 2, "tensors", term.sink(true));
  term.t += 1;
  bar.update(1, std::string(500, 'x'));
  EXPECT_LE(term.out.size(), 120u);
}

TEST(ProgressTest, NoteGoesAboveTheBarAndShortWorkCanStaySilent) {
  FakeTerminal term;
  {
    ProgressBar bar("load", 10, "tensors", term.sink(true));
    bar.show_after(1.0);
    term.t += 0.5;
    bar.update(5);
    EXPECT_EQ(term.out, "");  // half a second in: nothing yet
    term.t += 1.0;
    bar.update(6);
    EXPECT_NE(term.out.find("6/10 tensors"), std::string::npos);
    bar.note("estimate: 0:10");
    EXPECT_NE(term.out.find("\restimate: 0:10\n"), std::string::npos) << term.out;
    bar.update(7);  // redrawn at once below the note
    EXPECT_NE(term.out.find("7/10 tensors"), std::string::npos);
  }
  FakeTerminal pipe;
  ProgressBar bar("load", 10, "tensors", pipe.sink(false));
  bar.note("estimate");
  EXPECT_EQ(pipe.out, "");
}

TEST(ProgressTest, LibraryBarsAreOffUntilTheProgramTurnsThemOn) {
  EXPECT_FALSE(progress_bars_enabled());
  EXPECT_FALSE(library_progress_sink().is_terminal);
  enable_progress_bars(true);
  EXPECT_TRUE(progress_bars_enabled());
  enable_progress_bars(false);
}

TEST(ProgressTest, FormatsDurations) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(65.4), "1:05");
  EXPECT_EQ(format_duration(7384), "2:03:04");
  EXPECT_EQ(format_duration(-1), "?");
}

}  // namespace
}  // namespace ditto
