"""--acceptance from engine outputs: a vLLM /metrics scrape and an SGLang server log."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from speedplan.cli.app import app
from speedplan.engine.readers.sglang_log import read_sglang_log
from speedplan.engine.readers.vllm_metrics import read_vllm_metrics
from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import al_iid
from speedplan.plan.acceptance_sources import parse_acceptance, parse_acceptance_options

# The exposition vLLM 0.33 writes (vllm/v1/spec_decode/metrics.py names, prometheus_client format);
# values synthetic. Two engines' series are summed.
SCRAPE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 60.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 40.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7961157572830746e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 210.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct",position="0"} 54.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct",position="0"} 36.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct",position="1"} 70.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct",position="2"} 50.0
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
"""

# SGLang 0.5.23 metrics_reporter.py format (and an older "Decode batch." line without accept rate).
LOG = """[2026-11-30 10:00:00] Prefill batch, #new-seq: 1, #new-token: 80, #cached-token: 0
[2026-11-30 10:00:01] Decode batch, #running-req: 1, #token: 300, token usage: 0.01, accept len: 3.00, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 310.22, #queue-req: 0
[2026-11-30 10:00:02] Decode batch [4410], #running-req: 3, #token: 900, token usage: 0.02, accept len: 3.40, accept rate: 0.60, cuda graph: True, gen throughput (token/s): 850.00, #queue-req: 0
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_vllm_scrape_gives_per_position_acceptance(tmp_path):
    path = _write(tmp_path, "metrics.txt", SCRAPE)
    counters = read_vllm_metrics(path)
    assert counters.num_drafts == 100 and counters.accepted_per_position == (90.0, 70.0, 50.0)
    assert counters.acceptance_length == pytest.approx(3.1)  # as vllm bench serve computes it
    assert counters.models == ("meta-llama/Llama-3.1-8B-Instruct",)
    acc = parse_acceptance(str(path))
    assert acc.positions == pytest.approx((0.9, 0.7 / 0.9, 0.5 / 0.7))
    assert float(acc.chain_al(3)) == pytest.approx(3.1)
    assert acc.source.startswith(f"vLLM metrics: {path} (100 drafts, AL 3.100 at D=3")
    assert acc.source.endswith("; its server's model 'meta-llama/Llama-3.1-8B-Instruct')")  # which model it measured


@pytest.mark.parametrize("text, words", [
    (SCRAPE.replace('} 60.0', '} sixty'), "metrics.txt:3: vllm:spec_decode_num_drafts_total value 'sixty' is not a number"),
    (SCRAPE.replace(',position="1"', ""), "metrics.txt:10: vllm:spec_decode_num_accepted_tokens_per_pos_total needs"),
    (SCRAPE.replace('position="2"', 'position="5"'), "positions [0, 1, 5]"),
    (SCRAPE.replace("} 70.0", "} 95.0"), "position 1 (95) exceeds position 0 (90)"),
    ("\n".join(l for l in SCRAPE.splitlines() if "num_drafts_total" not in l), "no vllm:spec_decode_num_drafts_total"),
    (SCRAPE.replace("} 60.0", "} 0").replace("} 40.0", "} 0"), "is 0"),
    (SCRAPE.replace('{engine="1",', '{engine="1,'), "metrics.txt:4: malformed labels"),
    (SCRAPE.replace("} 60.0", "} +Inf"), "metrics.txt:3: vllm:spec_decode_num_drafts_total value must be a finite count"),
])
def test_malformed_vllm_scrapes_name_file_line_and_field(tmp_path, text, words):
    path = _write(tmp_path, "metrics.txt", text)
    with pytest.raises(SpeedplanInputError) as err:
        read_vllm_metrics(path)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_sglang_log_gives_accept_length_and_its_draft_length(tmp_path):
    path = _write(tmp_path, "server.log", LOG)
    records = read_sglang_log(path)
    assert [(r.line, r.accept_len, r.accept_rate, r.running_req) for r in records] == [
        (2, 3.0, 0.5, 1), (3, 3.4, 0.6, 3)]
    acc = parse_acceptance(str(path))  # D = (AL - 1) / rate = 4 on both lines
    mean_al = (3.0 + 3 * 3.4) / 4  # lines weighted by running requests
    assert al_iid(acc.positions[0], 4) == pytest.approx(mean_al, abs=1e-6)
    assert "D=4 from accept rate" in acc.source
    older = _write(tmp_path, "old.log", "Decode batch. #running-req: 2, #token: 10, token usage: 0.00, accept len: 2.50, "
                                        "gen throughput (token/s): 99.0, #queue-req: 0\n")
    with pytest.raises(SpeedplanInputError, match="old.log@D"):
        parse_acceptance(str(older))
    assert al_iid(parse_acceptance(f"{older}@3").positions[0], 3) == pytest.approx(2.5, abs=1e-6)


@pytest.mark.parametrize("line, words", [
    ("Decode batch, #running-req: 1, accept len: n/a, accept rate: 0.5", "server.log:1: accept len 'n/a' is not a number"),
    ("Decode batch, #running-req: 1, accept len: 0.50, accept rate: 0.5", "server.log:1: accept len 0.5 is not a number from 1"),
    ("Decode batch, #running-req: 1, accept len: inf, accept rate: 0.5", "server.log:1: accept len inf is not a number from 1"),
    ("Decode batch, #running-req: inf, accept len: 2.0, accept rate: 0.5", "#running-req inf is not a count"),  # OverflowError
    ("Decode batch, #running-req: 2.5, accept len: 2.0, accept rate: 0.5", "#running-req 2.5 is not a count"),
    ("Decode batch, #running-req: 1, accept len: 2.0, accept rate: 1.5", "server.log:1: accept rate 1.5 is outside"),
    ("Prefill batch, #new-seq: 1", "no 'Decode batch ... accept len: X' lines"),
])
def test_malformed_sglang_logs_name_file_line_and_field(tmp_path, line, words):
    path = _write(tmp_path, "server.log", line + "\n")
    with pytest.raises(SpeedplanInputError) as err:
        read_sglang_log(path)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_engine_acceptance_reaches_the_sweep_like_a_trace(tmp_path):
    path = _write(tmp_path, "metrics.txt", SCRAPE)
    opts = parse_acceptance_options([f"eagle3:{path}"], ("eagle3", "eagle3-tree"))
    from speedplan.plan.sweep import sweep

    r = sweep(mechanisms=["eagle3"], batches=[1], draft_lens=[3], contexts=[2000], acceptance=opts)
    assert r.frame[r.frame.mechanism == "eagle3"].acceptance_length.iloc[0] == pytest.approx(3.1)
    assert "published_acceptance" in r.meta and "eagle3" not in r.meta["published_acceptance"]


def test_a_servers_acceptance_without_a_mechanism_is_refused_where_several_are_swept(tmp_path):
    """A scrape measured the drafter its server ran: unprefixed it went to every mechanism swept (a vLLM
    plan switched to n-gram on EAGLE-3's counters, 2026-12-04 walkthrough). One mechanism swept: it applies."""
    from speedplan.plan.sweep import sweep

    path = _write(tmp_path, "metrics.txt", SCRAPE)
    opts = parse_acceptance_options([str(path)], ("eagle3", "ngram"))
    with pytest.raises(SpeedplanInputError, match=r"a vLLM metrics file measures the one drafter that ran; 2 "
                       r"mechanisms are swept \(eagle3, ngram\): prefix it .*\(eagle3:"):
        sweep(mechanisms=["eagle3", "ngram"], batches=[1], draft_lens=[3], acceptance=opts)
    r = sweep(mechanisms=["eagle3"], batches=[1], draft_lens=[3], contexts=[2000], acceptance=opts)
    assert r.frame[r.frame.mechanism == "eagle3"].acceptance_length.iloc[0] == pytest.approx(3.1)
    # numbers given bare still reach every mechanism: they are the user's, not one server's
    sweep(mechanisms=["eagle3", "ngram"], batches=[1], draft_lens=[3], acceptance=parse_acceptance_options(
        ["alpha=0.7"], ("eagle3", "ngram")))


@pytest.mark.parametrize("name, text", [("metrics.txt", SCRAPE.replace("} 70.0", "} 95.0")),
                                        ("server.log", "Decode batch, #running-req: 1, accept len: x\n")])
def test_malformed_engine_files_exit_2_in_one_line(tmp_path, name, text):
    path = _write(tmp_path, name, text)
    out = tmp_path / "rep"
    proc = CliRunner().invoke(app, ["sweep", "--out", str(out), "--acceptance", f"eagle3:{path}"])
    assert isinstance(proc.exception, SpeedplanInputError)
    assert name in str(proc.exception) and "\n" not in str(proc.exception) and not out.exists()


def test_match_key_and_bad_specs():
    acc = parse_acceptance("positions=0.9,0.8,match=0.5")
    assert acc.positions == (0.9, 0.8) and acc.match == 0.5
    for spec in ("alpha=0.5,ranks=0.3", "alpha=0.5,match=0.2,match=0.3", "alpha=0.5,beta=2", "alpha=0.5,match=x"):
        with pytest.raises(SpeedplanInputError):
            parse_acceptance(spec)


def test_at_d_is_for_sglang_logs_and_a_file_may_have_an_at_in_its_name(tmp_path):
    """`ok.json@x` dropped the @x in silence, and `run@home.json` was refused (until 2026-12-03)."""
    ok = tmp_path / "ok.json"
    ok.write_text('{"alpha": 0.7}')
    with pytest.raises(SpeedplanInputError, match="@D is for an SGLang server log"):
        parse_acceptance(f"{ok}@3")
    at = tmp_path / "run@home.json"
    at.write_text('{"alpha": 0.7}')
    assert parse_acceptance(str(at)).positions[0] == pytest.approx(0.7)


def test_engine_acceptance_that_cannot_be_is_refused(tmp_path):
    """An audit of 2026-12-04: a log read at @1 with accept len 3.3 (above 1 + D) and a scrape
    with every draft accepted both became alpha 0.999 and a 5x plan."""
    log = _write(tmp_path, "server.log", LOG.replace(", accept rate: 0.50", "").replace(", accept rate: 0.60", ""))
    with pytest.raises(SpeedplanInputError, match=r"mean accept len 3\.300 exceeds 1 \+ D = 2"):
        parse_acceptance(f"{log}@1")
    full = _write(tmp_path, "full.log", log.read_text().replace("accept len: 3.40", "accept len: 3.00"))
    with pytest.raises(SpeedplanInputError, match=r"full.log@2: mean accept len 3\.000 is 1 \+ D"):
        parse_acceptance(f"{full}@2")
    # @D is trusted over accept rate, which gives D for chains only: a tree's rate divides by its nodes
    tree = _write(tmp_path, "tree.log", LOG.replace("accept rate: 0.50", "accept rate: 0.13").replace(
        "accept rate: 0.60", "accept rate: 0.13"))
    assert "D=4 given" in parse_acceptance(f"{tree}@4").source
    all_in = SCRAPE.replace("} 54.0", "} 60.0").replace("} 36.0", "} 40.0").replace("} 70.0", "} 100.0").replace(
        "} 50.0", "} 100.0").replace("} 210.0", "} 300.0")  # the accepted total agrees with its positions
    with pytest.raises(SpeedplanInputError, match="every drafted token was accepted at all 3 positions"):
        parse_acceptance(str(_write(tmp_path, "metrics.txt", all_in)))


def test_a_draft_models_acceptance_may_name_its_default_draft():
    """`sweep --help`'s own example, draft-model:llama-3.2-1b:alpha=0.6, was refused while the
    sweep's bare `draft-model` resolved to that very draft (until 2026-12-04)."""
    from speedplan.plan.sweep import sweep

    acc = parse_acceptance_options(["draft-model:llama-3.2-1b:alpha=0.6"], ("draft-model",))
    for mechanisms in (["draft-model"], None):  # named bare, and the default sweep's
        result = sweep(mechanisms=mechanisms, batches=(1,), draft_lens=(2,), acceptance=acc)
        rows = result.frame[result.frame["mechanism"] == "draft-model:llama-3.2-1b"]
        assert len(rows) and rows["acceptance_length"].iloc[0] == pytest.approx(al_iid(0.6, 2))


def test_acceptance_errors_name_where_the_numbers_came_from(tmp_path):
    """{"alpha": 1.5} in a file was refused without the file's name; MECH:alpha with an unknown
    MECH and a folder both read as "not ... an existing file" (audit of 2026-12-04)."""
    bad = _write(tmp_path, "a.json", '{"alpha": 1.5}')
    with pytest.raises(SpeedplanInputError, match=r"a\.json: acceptance probabilities must be in \[0, 1\), got 1\.5"):
        parse_acceptance(str(bad))
    with pytest.raises(SpeedplanInputError, match="'foo' is not a mechanism"):
        parse_acceptance("foo:alpha=0.8")
    with pytest.raises(SpeedplanInputError, match="is a folder; give a file in it"):
        parse_acceptance(str(tmp_path))


def test_an_acceptance_length_at_a_draft_length_reads_as_the_iid_rate_that_gives_it():
    """al=A@D: what an engine reports (mean accept length at its D) gives back A at that D."""
    acc = parse_acceptance("al=3.3616@4")
    alpha = acc.positions[0]  # an i.i.d. rate: one position rate, repeated
    assert acc.kind == "iid" and alpha == pytest.approx(0.8, abs=1e-3)  # al_iid(0.8, 4) = 3.3616
    assert al_iid(alpha, 4) == pytest.approx(3.3616, abs=1e-6)
    assert "al=3.3616 at D=4" in acc.source
    keyed = parse_acceptance_options(["draft-model:llama-3.2-1b:al=2.5@3", "eagle3:al=3.2@4"],
                                     ("draft-model", "eagle3"))
    assert set(keyed) == {"draft-model:llama-3.2-1b", "eagle3"}
    assert al_iid(keyed["draft-model:llama-3.2-1b"].positions[0], 3) == pytest.approx(2.5, abs=1e-6)


@pytest.mark.parametrize("text, words", [
    ("al=3.2", "expected al=A@D"),
    ("al=x@4", "expected al=A@D"),
    ("al=3@0", "expected al=A@D"),
    ("al=3@1.5", "expected al=A@D"),
    ("al=3@65", "D must be in 1..64"),
    ("al=5@4", "is in [1, 5)"),
    ("al=0.9@4", "is in [1, 5)"),
    ("al=nan@4", "expected al=A@D"),
    ("al=3.2@1_0", "expected al=A@D"),  # int() reads 1_0 as 10
    ("al=3.2@+4", "expected al=A@D"),
    ("al=3.2@\u0664", "expected al=A@D"),  # an Arabic-Indic four
    ("al=3.2@4,match=1.5", "match must be in (0, 1], got 1.5"),
    ("al=3.2@4,match=0", "match must be in (0, 1], got 0"),
    ("al=3.2@4,match=x", "match must be a number in (0, 1]"),
    ("al=3.2@4,match=0.4,0.3", "after al=A@D only ,match=M"),
    ("al=3.2@4,alpha=0.5", "after al=A@D only ,match=M"),
])
def test_acceptance_length_forms_that_cannot_be_read_are_refused(text, words):
    with pytest.raises(SpeedplanInputError, match=re.escape(words)):
        parse_acceptance(text)


def test_an_ngram_acceptance_length_takes_its_match_rate():
    """al=A@D,match=M: A over the steps that drafted (vLLM's acceptance length counts drafts only),
    M the share of steps that drafted; a step without a match verifies one token."""
    acc = parse_acceptance_options(["ngram:al=2.2@4,match=0.5"], ("ngram",))["ngram"]
    plain = parse_acceptance("al=2.2@4")
    assert acc.positions == plain.positions and acc.match == 0.5 and plain.match == 1.0
    assert al_iid(acc.positions[0], 4) == pytest.approx(2.2, abs=1e-6)
    assert "over the steps that drafted, match=0.5" in acc.source


def test_a_scrape_whose_totals_disagree_is_refused_by_the_sweep_as_by_calibrate(tmp_path, capsys):
    """calibrate refuses a /metrics scrape whose accepted total is not the sum of its per-position
    counters (one cut short, edited or pieced together); `sweep --acceptance` read it (stop 44)."""
    from speedplan.cli.app import run

    cut = _write(tmp_path, "cut.txt", "\n".join(line for line in SCRAPE.splitlines() if 'position="2"' not in line))
    with pytest.raises(SpeedplanInputError, match=r"is not the sum of .* over its positions"):
        parse_acceptance(str(cut))
    out = tmp_path / "r"
    assert run(["sweep", "--mechanism", "eagle3", "--acceptance", str(cut), "--batch", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give one whole scrape" in err and not out.exists()
