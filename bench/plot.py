#!/usr/bin/python3
"""Draws a benchmark's JSON as an SVG: ditto beside its peer, the ratio and the CPU on the figure.

  bench/plot.py JSON --out FILE.svg [--kind KIND] [--row ROW] [--cpu NAME] [--date DATE] [--measured-here]

JSON is the object a benchmark printed (a file, or - for standard input); KIND, found from its
keys unless given, is one of:

  summary      bench/all.sh's summary.json: one bar per row that ran, its ratio beside its target
  compare      bench/llama_cpp.sh compare: prefill and decode tokens/s, ditto and llama.cpp
  batched      bench/llama_cpp.sh batched: generated tokens/s, ditto and llama.cpp
  serve        bench/serve.sh --json: throughput and latencies, ditto serve and llama-server
  tp           bench/tensor_parallel.sh: prefill and decode, one process and mpirun -np N
  speculative  ditto bench --scenario speculative --json: decode tokens/s, speculation on and off

--row ROW draws one row of an all.sh summary.json from the row's JSON kept in it (prefill512, tp2, ...).
The figure names the CPU (--cpu, else the JSON's "cpu", else with --measured-here this machine's)
and the date (--date, else the name of all.sh's results folder, else with --measured-here today,
UTC); a figure without them is refused. ditto's runs (compare and batched run it twice) are dots
on its bar, which is their mean — the mean the script's ratio uses.

The same JSON and arguments give the same bytes: matplotlib's svg backend with a fixed hash salt
and no date, text drawn as paths (so no font is needed to view it; each text is also in an XML
comment beside its paths). A name ending in .png writes a PNG instead (for a quick look).
Needs matplotlib (Debian's python3-matplotlib, installed by scripts/install-deps.sh).
"""

import argparse
import datetime
import json
import os
import re
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")  # no display; savefig picks the svg or png writer by the file's name
import matplotlib.pyplot as plt  # noqa: E402  (after use())
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

DITTO_COLOR, PEER_COLOR = "#2a6fb0", "#9a9a9a"
MET_COLOR, MISSED_COLOR = "#3a9a4a", "#d9822b"


def this_cpu():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return os.uname().machine


def mean(v):
    return sum(v) / len(v) if isinstance(v, list) else v


def kind_of(j):
    if "rows" in j and "raw" in j:
        return "summary"
    if j.get("scenario") == "speculative":
        return "speculative"
    if "ditto_over_llama_server" in j:
        return "serve"
    if "tensor_parallel_size" in j:
        return "tp"
    if "generated_ratio" in j:
        return "batched"
    if "prefill_ratio" in j and "llama_cpp_prefill_tokens_per_s" in j:
        return "compare"
    sys.exit("error: plot.py: not the JSON of a benchmark it knows (see bench/plot.py --help)")


# A panel: a title, a unit, bars [(label, value, runs or None, color)] and the ratio to state.
def panel(title, unit, bars, ratio, ratio_name, lower_is_better=False):
    return {"title": title, "unit": unit, "bars": bars, "ratio": ratio, "ratio_name": ratio_name,
            "lower_is_better": lower_is_better}


def compare_panels(j):
    model = os.path.basename(j["model"].rstrip("/"))
    ditto = j["ditto_prefill_tokens_per_s"]
    panels = [panel(f"prefill, {j['prompt_tokens']}-token prompt", "tokens/s",
                    [("ditto", mean(ditto), ditto, DITTO_COLOR),
                     ("llama.cpp", j["llama_cpp_prefill_tokens_per_s"], None, PEER_COLOR)],
                    j["prefill_ratio"], "ditto ÷ llama.cpp")]
    if "decode_ratio" in j:
        ditto = j["ditto_decode_tokens_per_s"]
        panels.append(panel("decode, batch 1", "tokens/s",
                            [("ditto", mean(ditto), ditto, DITTO_COLOR),
                             ("llama.cpp", j["llama_cpp_decode_tokens_per_s"], None, PEER_COLOR)],
                            j["decode_ratio"], "ditto ÷ llama.cpp"))
    return f"bench/llama_cpp.sh compare: {model}, {j['isa']}", panels


def batched_panels(j):
    model = os.path.basename(j["model"].rstrip("/"))
    ditto = j["ditto_generated_tokens_per_s"]
    return (f"bench/llama_cpp.sh batched: {model}, {j['isa']}",
            [panel(f"{j['num_seqs']} sequences × ({j['prompt_tokens']} + {j['output_tokens']}) tokens",
                   "generated tokens/s",
                   [("ditto", mean(ditto), ditto, DITTO_COLOR),
                    ("llama.cpp", j["llama_cpp_generated_tokens_per_s"], None, PEER_COLOR)],
                   j["generated_ratio"], "ditto ÷ llama.cpp")])


def serve_panels(j):
    ditto, llama, ratio = j["ditto_serve"], j["llama_server"], j["ditto_over_llama_server"]
    if not isinstance(ditto, dict) or not llama or not ratio:
        sys.exit("error: plot.py: this serve.sh JSON lacks ditto serve or llama-server (--no-ditto, "
                 "--no-llama-cpp?): nothing to compare")
    panels = []
    for key, title, unit, lower in (("output_tokens_per_s", "output throughput", "tokens/s", False),
                                    ("ttft_ms_p50", "time to first token, p50", "ms", True),
                                    ("itl_ms_p50", "inter-token latency, p50", "ms", True),
                                    ("e2e_ms_p50", "request latency, p50", "ms", True)):
        panels.append(panel(title, unit, [("ditto serve", ditto[key], None, DITTO_COLOR),
                                          ("llama-server", llama[key], None, PEER_COLOR)],
                            ratio[key], "ditto ÷ llama-server", lower))
    model = os.path.basename(j["model"].rstrip("/"))
    return f"bench/serve.sh: {model}, {j['num_clients']} clients, {j['num_requests']} requests", panels


def tp_panels(j):
    n = j["tensor_parallel_size"]
    panels = []
    for phase in ("prefill", "decode"):
        one = j.get(f"one_process_{phase}_tokens_per_s")
        # Older JSON has the ratio only: the bars are then relative to one process.
        unit = "tokens/s" if one else "relative to one process"
        one = one or 1.0
        panels.append(panel(phase, unit, [("1 process", one, None, PEER_COLOR),
                                          (f"mpirun -np {n}", one * j[f"{phase}_ratio"], None, DITTO_COLOR)],
                            j[f"{phase}_ratio"], f"{n} ranks ÷ 1 process"))
    return f"bench/tensor_parallel.sh: mpirun -np {n} against one process on the same cores, best of each", panels


def speculative_panels(j):
    panels = []
    for w in j["workloads"]:
        panels.append(panel(f"{w['workload']} workload (accepted {w['acceptance_rate']:.0%})", "decode tokens/s",
                            [("off", w["decode_tokens_per_s_off"], None, PEER_COLOR),
                             ("on", w["decode_tokens_per_s_on"], None, DITTO_COLOR)],
                            w["speedup"], "on ÷ off"))
    model = os.path.basename(j["model"].rstrip("/"))
    try:  # e.g. method=ngram, num_speculative_tokens=6: shorter than the JSON
        config = ", ".join(f"{k}={v}" for k, v in json.loads(j["speculative_config"]).items())
    except (ValueError, AttributeError):
        config = j["speculative_config"]
    return f"ditto bench --scenario speculative: {model}\n{config}", panels


def number(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.3g}"


def draw_panels(heading, panels, where):
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels) + 0.6, 4.6), squeeze=False)
    for ax, p in zip(axes[0], panels):
        values = [b[1] for b in p["bars"]]
        ax.bar(range(len(values)), values, color=[b[3] for b in p["bars"]], width=0.6)
        labels = []
        for i, (label, value, runs, _) in enumerate(p["bars"]):
            runs = runs if isinstance(runs, list) and len(runs) > 1 else []
            if runs:  # each run a dot, the bar their mean
                ax.plot([i] * len(runs), runs, "o", color="black", markersize=3, zorder=3)
                label += f"\n(mean of {len(runs)} runs: •)"
            labels.append(label)
            ax.annotate(number(value), (i, max([value] + runs)), xytext=(0, 5), textcoords="offset points",
                        ha="center", fontsize=9)
        ax.set_xticks(range(len(values)), labels)
        ax.set_ylabel(p["unit"])
        runs = [x for b in p["bars"] if isinstance(b[2], list) for x in b[2]]
        ax.set_ylim(0, max(values + runs) * 1.3)
        better = "lower is better" if p["lower_is_better"] else "higher is better"
        ax.set_title(f"{p['title']}\n({better})", fontsize=9.5)
        ax.text(0.5, 0.97, f"{p['ratio_name']} = {p['ratio']:.2f}×", transform=ax.transAxes, ha="center",
                va="top", fontsize=10.5, fontweight="bold")
        ax.spines[["top", "right"]].set_visible(False)
    width = int(fig.get_figwidth() * 12.5)  # characters of 11-point text across the figure, about
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in f"{heading}\n{where}".split("\n")), fontsize=11)
    fig.tight_layout()
    return fig


def draw_summary(j, where):
    shown = [r for r in j["rows"] if r.get("status") != "not run"]
    if not shown:
        sys.exit("error: plot.py: every row of this summary is 'not run': nothing to draw")
    fig, ax = plt.subplots(figsize=(11, 1.9 + 0.34 * len(shown)))
    y = list(range(len(shown)))[::-1]  # the first row on top
    top = max([r["measured"] or 0 for r in shown] + [r["target"] for r in shown] + [1.0])
    for yi, r in zip(y, shown):
        v, t = r["measured"], r["target"]
        if v is not None:
            ax.barh(yi, v, color=MET_COLOR if r["met"] else MISSED_COLOR, height=0.6)
        # all.sh does not write which way a target points; its "met" tells where it is unambiguous.
        lower = v is not None and v != t and r["met"] == (v < t)
        shown_value = r.get("status", "failed") if v is None else f"{v:.2f}"
        verdict = "" if v is None else ("met" if r["met"] else "missed")
        # A column right of the axes: the value, the target and the verdict, aligned row by row.
        ax.text(1.06, yi, shown_value, transform=ax.get_yaxis_transform(), ha="right", va="center", fontsize=9,
                fontweight="bold", color="black" if v is not None else MISSED_COLOR)
        ax.text(1.075, yi, f"target {'≤' if lower else '≥'} {t:g}  {verdict}", transform=ax.get_yaxis_transform(),
                va="center", fontsize=9)
    ax.plot([r["target"] for r in shown], y, "|", color="black", markersize=13, markeredgewidth=2)
    ax.axvline(1.0, color="#555555", linestyle="--", linewidth=1)
    ax.set_yticks(y, [r["row"] for r in shown], fontsize=9)
    ax.set_ylim(-0.6, len(shown) - 0.4)
    ax.set_xlim(0, top * 1.05)
    ax.set_xlabel("ditto ÷ peer (or a share of a peak, or an overhead: as the row says)", fontsize=9)
    ax.legend(handles=[Patch(color=MET_COLOR, label="target met"), Patch(color=MISSED_COLOR, label="target missed"),
                       Line2D([], [], color="black", marker="|", linestyle="", markersize=10, markeredgewidth=2,
                              label="target"),
                       Line2D([], [], color="#555555", linestyle="--", label="1.0: even with the peer")],
              loc="lower left", bbox_to_anchor=(0, 1.0), ncol=4, fontsize=8.5, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    not_run = len(j["rows"]) - len(shown)
    fig.suptitle(f"bench/all.sh: ditto against llama.cpp, llama-server or itself, ditto {j['commit']}"
                 + (f" ({not_run} row{'s' * (not_run > 1)} not run)" if not_run else "") + f"\n{where}",
                 fontsize=11)
    fig.tight_layout()
    return fig


def run_date(path):
    """The date of all.sh's results folder (<UTC time>, e.g. 20261206T010450Z), or None."""
    m = re.fullmatch(r"(\d{4})(\d{2})(\d{2})T\d{6}Z", os.path.basename(os.path.dirname(os.path.abspath(path))))
    return m and f"{m[1]}-{m[2]}-{m[3]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("json", help="the benchmark's JSON file, or - for standard input")
    ap.add_argument("--out", required=True, help="the figure: FILE.svg (or FILE.png)")
    ap.add_argument("--kind", choices=["summary", "compare", "batched", "serve", "tp", "speculative"])
    ap.add_argument("--row", help="of an all.sh summary.json: draw this row's own JSON (e.g. prefill512)")
    ap.add_argument("--cpu", help="the CPU that ran the benchmark")
    ap.add_argument("--date", help="when it ran (e.g. 2026-12-06)")
    ap.add_argument("--measured-here", action="store_true",
                    help="the JSON was just measured on this machine: its CPU and today's date by default")
    args = ap.parse_args()
    j = json.load(sys.stdin if args.json == "-" else open(args.json))
    cpu = args.cpu or j.get("cpu") or (this_cpu() if args.measured_here else None)
    if args.row:
        if not (j.get("raw") or {}).get(args.row):
            sys.exit(f"error: plot.py: --row {args.row}: no such row in {args.json} (is it all.sh's summary.json?)")
        j = {"threads": j.get("threads"), **j["raw"][args.row]}
    date = args.date or (run_date(args.json) if args.json != "-" else None) or (
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d") if args.measured_here else None)
    if not cpu or not date:
        sys.exit("error: plot.py: say which CPU ran it and when (--cpu, --date, or --measured-here)")
    threads = f", {j['threads']} threads" if j.get("threads") else ""
    where = f"CPU: {cpu}{threads}; {date}"
    kind = args.kind or kind_of(j)
    if kind == "summary":
        fig = draw_summary(j, where)
    else:
        heading, panels = {"compare": compare_panels, "batched": batched_panels, "serve": serve_panels,
                           "tp": tp_panels, "speculative": speculative_panels}[kind](j)
        fig = draw_panels(heading, panels, where)
    plt.rcParams["svg.hashsalt"] = "ditto"  # ids of clip paths and glyphs: fixed, not random
    metadata = {"Date": None} if args.out.endswith(".svg") else {}
    fig.savefig(args.out, metadata=metadata, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
