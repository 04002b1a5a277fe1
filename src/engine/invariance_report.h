// `ditto check-invariance --html`: the contract rows as one self-contained HTML page — inline CSS
// and inline SVG, no script, no external URL, so it opens offline in any browser. A table of the
// rows (what was compared, cases, tokens, mismatches, note, PASS/FAIL) and, for each failing row, a
// histogram of the first divergence index of its mismatching cases.
//
// The page's structure is a stable interface (a browser test reads it):
//   <table id="contract-rows">, each row <tr class="contract-row" data-row="NAME"
//   data-mismatches="N" data-verdict="pass|fail">, each failing row's plot
//   <svg class="divergence-plot" data-row="NAME">, and <p id="verdict" data-verdict="pass|fail">.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/invariance_check.h"

namespace ditto {

// What the page says about the run beside its rows.
struct InvarianceReportInfo {
  std::string model;                                           // as given on the command line
  std::string cpu;                                             // the CPU's model name
  std::string date;                                            // when the run started, e.g. "2026-12-06 06:30:54 UTC"
  std::vector<std::pair<std::string, std::string>> options{};  // (flag, value) as the run used them
  double estimated_seconds = -1.0;                             // the estimate said at start; negative: none
  double seconds = -1.0;                                       // the run's wall time; negative: unknown
};

// The page (UTF-8). A row passes when its mismatches are 0; the page's verdict is "fail" when any
// row fails.
std::string invariance_report_html(const std::vector<InvarianceRow>& rows, const InvarianceReportInfo& info);

}  // namespace ditto
