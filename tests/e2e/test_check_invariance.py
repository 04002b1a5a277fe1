"""`ditto check-invariance` on a small generated model: every row 0 mismatches; and the negative
control — a test double that nudges logits by the step's batch size — makes it report mismatches
and exit 1, so the harness can fail. --quick runs every row, sooner; --html writes a report page
whose table a browser test reads; on a terminal a progress bar and an estimate go to stderr, and
nothing does when stderr is a pipe or with --quiet."""
import html.parser
import json
import time

import pytest

from conftest import run_ditto, run_on_terminal

ARGS = ["--num-prompts", "12", "--max-prompt-tokens", "80", "--max-tokens", "8", "--json"]
# The negative controls: the injected fault changes the logits of every batched step, so four
# prompts (batched in every row that batches) show it as surely as twelve, at a third of the time.
CONTROL_ARGS = ["--num-prompts", "4", "--max-prompt-tokens", "80", "--max-tokens", "8", "--json"]


@pytest.fixture(scope="module")
def model(ditto_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("qwen3check") / "m"
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-0.6b", "--num-hidden-layers", "2",
              "--seed", "8", "--out", out)
    return out


def test_every_row_matches(ditto_bin, model):
    report = json.loads(run_ditto(ditto_bin, "check-invariance", "--model", model, *ARGS).stdout)
    names = [r["row"] for r in report["rows"]]
    assert len(names) == 19, names
    # The model has the real Qwen3 tokenizer: structured outputs join the mix (issue 33), and a
    # first row walks each constrained output through its constraint.
    assert names[0] == "structured outputs: each output satisfies its constraint"
    modes = [n for n in names if n.startswith("logprobs_mode ")]  # issue 30: one row per mode but raw_logprobs
    assert [m.split()[1].rstrip(":") for m in modes] == ["raw_logits", "processed_logprobs", "processed_logits"]
    assert "beam search: alone vs all prompts at once" in names
    for r in report["rows"]:
        assert r["mismatches"] == 0, r
        assert r["cases"] > 0 and r["tokens_compared"] > 0, r
    assert report["mismatches"] == 0
    notes = " ".join(r["note"] for r in report["rows"])
    assert "preemptions" in notes and "prefix-cache hit tokens" in notes
    # The LLM keeps its prefix cache between generate() calls: the row run after another finds it.
    warm = next(r for r in report["rows"] if r["row"] == "prefix cache kept from the previous generate() call")
    assert "prefix-cache hit tokens" in warm["note"], warm
    speculative = [r for r in report["rows"] if r["row"].startswith("speculative decoding on vs off")]
    assert len(speculative) == 2
    for r in speculative:  # guesses were made, and some kept: the rows verified something
        assert r["spec_decode_num_accepted_tokens"] > 0, r
        assert r["spec_decode_num_draft_tokens"] >= r["spec_decode_num_accepted_tokens"], r


class ReportPage(html.parser.HTMLParser):
    """What a browser test reads of the --html page: the contract rows (attributes and cells by
    class), the divergence plots' rows, the overall verdict, and anything that would load."""

    def __init__(self):
        super().__init__()
        self.rows, self.plots, self.verdict, self.external = {}, [], None, []
        self._row, self._cell, self._in_table = None, None, False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("id") == "contract-rows":
            self._in_table = True
        elif tag == "tr" and "contract-row" in a.get("class", "").split():
            assert self._in_table
            self._row = {"verdict": a["data-verdict"], "mismatches": int(a["data-mismatches"]), "cells": {}}
            self.rows[a["data-row"]] = self._row
        elif tag == "td" and self._row is not None:
            self._cell = a.get("class", "").split()[-1]
            self._row["cells"][self._cell] = ""
        elif tag == "svg" and "divergence-plot" in a.get("class", "").split():
            self.plots.append(a["data-row"])
        elif tag == "p" and a.get("id") == "verdict":
            self.verdict = a["data-verdict"]
        if tag in ("script", "link", "img", "iframe") or any(k in ("src", "href") for k in a):
            self.external.append((tag, a))

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None
        elif tag == "tr":
            self._row = None
        elif tag == "table":
            self._in_table = False

    def handle_data(self, data):
        if self._row is not None and self._cell is not None:
            self._row["cells"][self._cell] += data


def read_report(path):
    page = ReportPage()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    assert page.external == [], page.external  # self-contained: nothing to fetch, nothing to run
    return page


def assert_report_matches(page, report):
    """Every row of the JSON output is in the page's table, with its counts and verdict."""
    assert list(page.rows) == [r["row"] for r in report["rows"]]
    for r in report["rows"]:
        row = page.rows[r["row"]]
        assert row["mismatches"] == r["mismatches"]
        assert row["verdict"] == ("pass" if r["mismatches"] == 0 else "fail")
        cells = row["cells"]
        assert int(cells["cases"]) == r["cases"] and int(cells["tokens"]) == r["tokens_compared"]
        assert int(cells["mismatches"]) == r["mismatches"] and cells["note"] == r["note"]
        assert cells["what"], r["row"]  # a sentence on what was compared
    assert page.verdict == ("pass" if report["mismatches"] == 0 else "fail")


def test_negative_control_reports_mismatches(ditto_bin, model, tmp_path):
    page_path = tmp_path / "report.html"
    proc = run_ditto(ditto_bin, "check-invariance", "--model", model, *CONTROL_ARGS, "--inject-fault", "batch-size",
                     "--html", page_path, check=False)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["mismatches"] > 0
    assert proc.stderr.startswith("error: check-invariance:")
    # The page shows the failure: each failing row with a plot of where its cases first diverged.
    page = read_report(page_path)
    assert_report_matches(page, report)
    failing = [r["row"] for r in report["rows"] if r["mismatches"] > 0]
    assert failing and page.plots == failing


@pytest.fixture(scope="module")
def quick_run(ditto_bin, model, tmp_path_factory):
    """--quick with --html, stderr a pipe: (JSON report, page, seconds, stderr)."""
    page_path = tmp_path_factory.mktemp("quick") / "report.html"
    start = time.monotonic()
    proc = run_ditto(ditto_bin, "check-invariance", "--model", model, "--quick", "--json", "--html", page_path)
    return json.loads(proc.stdout), read_report(page_path), time.monotonic() - start, proc.stderr


def test_quick_runs_every_row_and_writes_the_page(quick_run):
    report, page, _, stderr = quick_run
    assert len(report["rows"]) == 19
    for r in report["rows"]:
        assert r["mismatches"] == 0, r
        assert r["cases"] > 0 and r["tokens_compared"] > 0, r
    assert report["rows"][1]["row"] == "batch of 1 vs all 7 at once"
    assert stderr == ""  # not a terminal: no bar, no estimate
    assert_report_matches(page, report)
    assert page.plots == []


def test_progress_bar_on_a_terminal_and_quick_beats_the_default(ditto_bin, model, quick_run):
    """The default run on a terminal draws its bar in place; it is still running when the quick
    run's whole time has passed (so --quick is quicker), and prints nothing on stdout meanwhile."""
    _, _, quick_seconds, _ = quick_run
    terminal, out, running = run_on_terminal(ditto_bin, ["check-invariance", "--model", model, "--json"],
                                             quick_seconds)
    assert running, "the default run finished within the quick run's time"
    assert "\rcheck-invariance [" in terminal and " rows, " in terminal, terminal
    assert out == ""
    if "will take about" in terminal:  # the estimate, once the first cases are timed
        line = terminal.split("will take about ")[1].split(",")[0]
        parts = [int(p) for p in line.split(":")]
        estimate = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
        assert estimate > quick_seconds / 2, terminal


def test_quiet_draws_nothing_on_a_terminal(ditto_bin, model):
    terminal, _, _ = run_on_terminal(ditto_bin, ["check-invariance", "--model", model, "--quick", "--quiet",
                                                 "--json"], 4)
    assert terminal == ""


def test_bad_fault_name(ditto_bin, model):
    proc = run_ditto(ditto_bin, "check-invariance", "--model", model, "--inject-fault", "cosmic-ray", check=False)
    assert proc.returncode == 1
    assert "the only fault is 'batch-size'" in proc.stderr


@pytest.fixture(scope="module")
def moe_model(ditto_bin, tmp_path_factory):
    """Qwen3-30B-A3B's configuration cut to 2 layers and 16 experts (top 8 stays: routing picks
    half of them per token)."""
    out = tmp_path_factory.mktemp("qwen3moecheck") / "m"
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-30b-a3b", "--num-hidden-layers", "2",
              "--num-experts", "16", "--seed", "9", "--out", out)
    return out


def test_every_row_matches_on_qwen3_moe(ditto_bin, moe_model):
    report = json.loads(run_ditto(ditto_bin, "check-invariance", "--model", moe_model, *ARGS).stdout)
    assert len(report["rows"]) == 19
    for r in report["rows"]:
        assert r["mismatches"] == 0, r
        assert r["cases"] > 0 and r["tokens_compared"] > 0, r
    proc = run_ditto(ditto_bin, "check-invariance", "--model", moe_model, *CONTROL_ARGS, "--inject-fault", "batch-size",
                     check=False)
    assert proc.returncode == 1 and json.loads(proc.stdout)["mismatches"] > 0


@pytest.mark.parametrize("outtype", ["q8_0", "q4_k"])
def test_every_row_matches_on_a_quantized_gguf(ditto_bin, model, outtype, tmp_path):
    """The same model exported as Q8_0 / Q4_K GGUF: the quantized kernels keep every row at 0."""
    gguf = tmp_path / f"m-{outtype}.gguf"
    run_ditto(ditto_bin, "export-gguf", "--model", model, "--output", gguf, "--outtype", outtype)
    report = json.loads(run_ditto(ditto_bin, "check-invariance", "--model", gguf, *ARGS).stdout)
    assert len(report["rows"]) == 19
    for r in report["rows"]:
        assert r["mismatches"] == 0, r
        assert r["cases"] > 0 and r["tokens_compared"] > 0, r
