#include "engine/invariance_report.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/html_escape.h"
#include "core/progress.h"

namespace ditto {
namespace {

constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #1d2330; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
dl.run { display: grid; grid-template-columns: max-content auto; gap: 0.15em 1em; }
dl.run dt { font-weight: 600; } dl.run dd { margin: 0; }
table { border-collapse: collapse; width: 100%; margin: 1em 0; }
th, td { border-bottom: 1px solid #d9dde5; padding: 0.35em 0.5em; text-align: left; vertical-align: top; }
th { background: #f1f3f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.what { color: #4a5263; max-width: 30em; }
.pass { color: #17653a; font-weight: 700; } .fail { color: #b3261e; font-weight: 700; }
tr.contract-row[data-verdict="fail"] { background: #fdf1f0; }
#verdict { font-size: 1.3em; }
figure { margin: 1.5em 0; } figcaption { font-weight: 600; margin-bottom: 0.3em; }
svg.divergence-plot { background: #fafbfc; border: 1px solid #d9dde5; }
)";

std::string num(int64_t n) { return std::to_string(n); }

std::string verdict(bool pass) { return pass ? "pass" : "fail"; }

// A histogram of the first divergence indices: one bar per index (or per bin of several when they
// span more than 40), the count above each bar.
std::string divergence_plot(const InvarianceRow& row) {
  const std::vector<int64_t>& d = row.first_divergence;
  const int64_t max_index = d.empty() ? 0 : *std::max_element(d.begin(), d.end());
  const int64_t bin = std::max<int64_t>(1, (max_index + 40) / 40);
  const int64_t bins = max_index / bin + 1;
  std::vector<int64_t> counts(static_cast<size_t>(bins), 0);
  for (int64_t i : d) ++counts[static_cast<size_t>(std::max<int64_t>(0, i) / bin)];
  const int64_t peak = std::max<int64_t>(1, *std::max_element(counts.begin(), counts.end()));
  const int width = 560, height = 220, left = 48, right = 12, top = 16, bottom = 40;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const double bar_w = plot_w / static_cast<double>(bins);
  char buf[1024];
  std::string svg = "<svg class=\"divergence-plot\" data-row=\"" + html_escape(row.name) +
                    "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
                    "\" viewBox=\"0 0 " + num(width) + " " + num(height) + "\" role=\"img\">\n";
  svg += "<title>" + html_escape(row.name) + ": first divergence index of " + num(static_cast<int64_t>(d.size())) +
         " mismatching cases</title>\n";
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#1d2330\"/>"
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#1d2330\"/>\n",
                left, top, left, height - bottom, left, height - bottom, width - right, height - bottom);
  svg += buf;
  for (int64_t b = 0; b < bins; ++b) {
    const int64_t c = counts[static_cast<size_t>(b)];
    const double h = plot_h * static_cast<double>(c) / static_cast<double>(peak);
    const double x = left + bar_w * static_cast<double>(b);
    if (c > 0) {
      std::snprintf(buf, sizeof buf,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#b3261e\"/>"
                    "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%lld</text>\n",
                    x + 1, top + plot_h - h, std::max(1.0, bar_w - 2), h, x + bar_w / 2, top + plot_h - h - 3,
                    static_cast<long long>(c));
      svg += buf;
    }
    const int64_t label_every = std::max<int64_t>(1, bins / 10);
    if (b % label_every == 0) {
      std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%lld</text>\n",
                    x + bar_w / 2, height - bottom + 14, static_cast<long long>(b * bin));
      svg += buf;
    }
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">first divergence index "
                "(output token position%s)</text>\n"
                "<text x=\"12\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 12 %.1f)\">"
                "cases</text>\n"
                "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%lld</text>\n",
                left + plot_w / 2, height - 8, bin > 1 ? (std::string(", bins of ") + num(bin)).c_str() : "",
                top + plot_h / 2, top + plot_h / 2, left - 4, top + 8, static_cast<long long>(peak));
  svg += buf;
  return svg + "</svg>\n";
}

}  // namespace

std::string invariance_report_html(const std::vector<InvarianceRow>& rows, const InvarianceReportInfo& info) {
  int64_t total = 0;
  int64_t failing = 0;
  for (const InvarianceRow& r : rows) {
    total += r.mismatches;
    failing += r.mismatches > 0;
  }
  const bool pass = total == 0;
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>ditto check-invariance: " +
      html_escape(info.model) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  h += "<h1>ditto check-invariance</h1>\n<p>Each request's output, run under every condition below, compared bit "
       "for bit with the same request run alone.</p>\n";
  h += "<p id=\"verdict\" data-verdict=\"" + verdict(pass) + "\" class=\"" + verdict(pass) + "\">" +
       (pass ? std::string("PASS: every row matched, ") + num(static_cast<int64_t>(rows.size())) + " rows"
             : std::string("FAIL: ") + num(failing) + " of " + num(static_cast<int64_t>(rows.size())) + " rows, " +
                   num(total) + " mismatches") +
       "</p>\n";
  h += "<dl class=\"run\">\n<dt>Model</dt><dd>" + html_escape(info.model) + "</dd>\n<dt>CPU</dt><dd>" +
       html_escape(info.cpu) + "</dd>\n<dt>Date</dt><dd>" + html_escape(info.date) + "</dd>\n";
  if (info.seconds >= 0) {
    h += "<dt>Run time</dt><dd>" + format_duration(info.seconds);
    if (info.estimated_seconds >= 0) h += " (estimated at start: " + format_duration(info.estimated_seconds) + ")";
    h += "</dd>\n";
  }
  std::string options;
  for (const auto& [flag, value] : info.options) options += (options.empty() ? "" : " ") + flag + " " + value;
  h += "<dt>Options</dt><dd><code>" + html_escape(options) + "</code></dd>\n</dl>\n";

  h += "<table id=\"contract-rows\">\n<thead><tr><th>Row</th><th>What was compared</th><th>Cases</th>"
       "<th>Tokens compared</th><th>Mismatches</th><th>Note</th><th>Verdict</th></tr></thead>\n<tbody>\n";
  for (const InvarianceRow& r : rows) {
    const bool ok = r.mismatches == 0;
    h += "<tr class=\"contract-row\" data-row=\"" + html_escape(r.name) + "\" data-mismatches=\"" + num(r.mismatches) +
         "\" data-verdict=\"" + verdict(ok) + "\">";
    h += "<td class=\"name\">" + html_escape(r.name) + "</td><td class=\"what\">" + html_escape(r.description) +
         "</td><td class=\"num cases\">" + num(r.cases) + "</td><td class=\"num tokens\">" + num(r.tokens) +
         "</td><td class=\"num mismatches\">" + num(r.mismatches) + "</td><td class=\"note\">" + html_escape(r.note) +
         "</td><td class=\"" + verdict(ok) + "\">" + (ok ? "PASS" : "FAIL") + "</td></tr>\n";
  }
  h += "</tbody>\n</table>\n";
  if (!pass) {
    h += "<h2>Where failing rows first diverge</h2>\n<p>Per mismatching case, the output token position at which "
         "it first differs from its run alone (0: from the first token, or on the prompt side; the output's "
         "length: every token the same, a later field such as the cumulative logprob not).</p>\n";
    for (const InvarianceRow& r : rows)
      if (r.mismatches > 0)
        h += "<figure>\n<figcaption>" + html_escape(r.name) + "</figcaption>\n" + divergence_plot(r) + "</figure>\n";
  }
  return h + "</body>\n</html>\n";
}

}  // namespace ditto
