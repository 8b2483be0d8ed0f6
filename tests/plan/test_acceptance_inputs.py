"""--acceptance and --batch-weights inputs an audit of 2026-12-04 read wrongly: trace steps that
contradict their own header, files that start with a byte-order mark, and messages that named
the wrong problem."""

from __future__ import annotations

import json

import numpy as np
import pytest

from speedplan.cli.app import run
from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance_sources import parse_acceptance, parse_acceptance_options
from speedplan.plan.batch_weights import parse_batch_weights

META = {"type": "meta", "schema": "speedplan.trace/1", "mechanism": "ngram", "draft_len": 3, "tree": None, "batch": 1}
SCRAPE = """vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 300.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 90.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 70.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 50.0
"""


def _trace(tmp_path, *steps, meta=META):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in (meta, *steps)) + "\n")
    return path


@pytest.mark.parametrize("step, meta, words", [
    ({"batch": 1, "accepted": [9]}, META, "t.jsonl:2: 'accepted' count 9 exceeds the meta's draft_len 3"),
    ({"batch": 1, "accepted": [1, 2, 3]}, META, "t.jsonl:2: 'accepted' holds 3 counts but the step's 'batch' is 1"),
    ({"accepted": [1, 2]}, META, "t.jsonl:2: 'accepted' holds 2 counts but the meta's 'batch' is 1"),
    ({"batch": 4, "accepted": [1, 1, 1, 1]}, META, "t.jsonl:2: step 'batch' 4 exceeds the meta's batch 1"),
    ({"batch": 0, "accepted": []}, META, "t.jsonl:2: step 'batch' must be an integer >= 1"),
    ({"accepted": [1]}, {**META, "batch": "one"}, "t.jsonl:1: meta 'batch' must be an integer >= 1"),
])
def test_trace_steps_are_checked_against_the_traces_header(tmp_path, step, meta, words):
    """docs/trace.md: `accepted` holds one count in 0..draft_len per active sequence (the step's
    batch, at most the meta's). [9] at draft_len 3 read as AL 8.96; [1,2,3] at batch 1 passed."""
    path = _trace(tmp_path, {"type": "step", **step}, meta=meta)
    with pytest.raises(SpeedplanInputError) as err:
        parse_acceptance(str(path))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_trace_that_keeps_to_its_header_still_fits(tmp_path):
    steps = [{"type": "step", "batch": 2, "accepted": [3, 1]}, {"type": "step", "batch": 1, "accepted": [0]}]
    acc = parse_acceptance(str(_trace(tmp_path, *steps, meta={**META, "batch": 2})))
    # an n-gram trace is fitted as runs of copied text (fit_runs): its AL at the trace's D is the measured one
    assert acc.chain_al(np.array([3]))[0] == pytest.approx(1 + 4 / 3, rel=2e-3) and "3 sequence-steps, D=3" in acc.source


def test_a_bad_trace_exits_2_in_one_line(tmp_path, capsys):
    path = _trace(tmp_path, {"type": "step", "batch": 1, "accepted": [9]})
    out = tmp_path / "rep"
    assert run(["sweep", "--mechanism", "ngram", "--acceptance", str(path), "--batch", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "exceeds the meta's draft_len 3" in err and err.count("\n") == 1 and not out.exists()


def test_files_that_start_with_a_byte_order_mark_are_read(tmp_path):
    """Excel's "CSV UTF-8" and some editors write a BOM; these two readers took it for part of
    the header (or of the first metric's name)."""
    csv = tmp_path / "w.csv"
    csv.write_text("\ufeffbatch,weight\n1,4\n8,2\n", encoding="utf-8")
    assert parse_batch_weights(str(csv)) == {1: 4.0, 8: 2.0}
    scrape = tmp_path / "m.prom"
    scrape.write_text("\ufeff" + SCRAPE, encoding="utf-8")
    assert float(parse_acceptance(str(scrape)).chain_al(3)) == pytest.approx(3.1)


@pytest.mark.parametrize("spec, words", [
    ("", "--acceptance '': empty; give alpha=, positions=, ranks=, al=A@D or an acceptance file"),
    ("  ", "--acceptance '  ': empty"),
    ("eagle3:", "--acceptance 'eagle3:': nothing after 'eagle3:'; give alpha="),
    ("draft-model:llama-3.2-1b:", "nothing after 'draft-model:llama-3.2-1b:'"),
])
def test_an_empty_acceptance_says_it_is_empty(spec, words):
    """Both read as the current folder: "'' is a folder; give a file in it"."""
    with pytest.raises(SpeedplanInputError) as err:
        parse_acceptance_options([spec], ("eagle3", "draft-model"))
    assert words in str(err.value) and "folder" not in str(err.value)


def test_a_file_that_is_no_acceptance_format_says_so(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("INFO: server started\n")
    with pytest.raises(SpeedplanInputError, match=r"server\.log: neither an SGLang server log .* nor JSON \(Expecting"):
        parse_acceptance(str(log))
    bad = tmp_path / "a.json"
    bad.write_text("{")
    with pytest.raises(SpeedplanInputError, match=r"a\.json: malformed JSON"):  # a .json file is JSON that is broken
        parse_acceptance(str(bad))


def test_an_sglang_accept_rate_of_0_is_read_as_a_value(tmp_path):
    """accept rate 0.00 with accept len 1.00: no draft accepted, alpha 0 at any D (it said the
    lines had no 'accept rate'); with accept len above 1 the 0 is a rounded rate that gives no D."""
    line = "Decode batch, #running-req: 4, #token: 900, accept len: {al}, accept rate: 0.00, gen throughput (token/s): 9.0\n"
    none = tmp_path / "none.log"
    none.write_text(line.format(al="1.00") * 2)
    acc = parse_acceptance(str(none))
    assert acc.positions[0] == 0.0 and float(acc.chain_al(4)) == 1.0 and "accept rate 0" in acc.source
    rounded = tmp_path / "rounded.log"
    rounded.write_text(line.format(al="1.02"))
    with pytest.raises(SpeedplanInputError, match=r"rounded\.log: accept rate is 0 on every line but mean accept len "
                                                  r"is 1\.020 > 1.*rounded\.log@D"):
        parse_acceptance(str(rounded))
    assert parse_acceptance(f"{rounded}@3").positions[0] > 0
