"""An SGLang user's round trip: the launch speedplan writes, what SGLang makes of its flags, and
the server log of that launch read back as acceptance.

Formats and rules from SGLang's own source (GitHub index):
- `python/sglang/srt/managers/scheduler_components/metrics_reporter.py` @ 00df707e8de4,
  `report_decode_stats`: "Decode batch{iter}, #running-req: N, #cached-token: C, {usage}accept len:
  A, accept rate: R, cuda graph: G, gen throughput (token/s): X, #queue-req: Q", where R = correct
  drafts / (forward count x (speculative_num_draft_tokens - 1)).
- `python/sglang/srt/arg_groups/speculative_hook.py` @ 004c82e07d87: `_handle_eagle_family`
  (topk 1 forces num_draft_tokens = num_steps + 1), `_handle_ngram` (topk = max BFS breadth,
  num_steps = num_draft_tokens // topk), `_init_adaptive_speculative_params` (num_steps must be
  a candidate; num_draft_tokens = num_steps + 1).
- the engine launch logs `server_args=ServerArgs(...)` once (`logger.info(f"{server_args=}")`).
"""

from __future__ import annotations

import json
import shlex

import pytest

from speedplan.cli.app import run
from speedplan.engine.readers.sglang_log import mean_accept_length, read_sglang_log
from speedplan.errors import SpeedplanInputError
from speedplan.plan.acceptance import al_iid
from speedplan.plan.acceptance_sources import parse_acceptance
from speedplan.serving import ServingPlan
from speedplan.serving.sglang import render


def server_args_line(steps, topk, tokens, algorithm="EAGLE3", adaptive=False) -> str:
    """The dataclass repr SGLang logs at launch (fields in ServerArgs order, abridged)."""
    return (f"[2026-01-12 10:00:01] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', "
            f"tp_size=1, speculative_algorithm='{algorithm}', speculative_draft_model_path=None, "
            f"speculative_num_steps={steps}, speculative_eagle_topk={topk}, speculative_num_draft_tokens={tokens}, "
            f"speculative_adaptive={adaptive}, speculative_adaptive_config=None, max_running_requests=48)")


def decode_line(running, al, rate, usage="#token: 9000, token usage: 0.02, ", it="") -> str:
    return (f"[2026-01-12 10:00:31 TP0] Decode batch{it}, #running-req: {running}, #cached-token: 0, {usage}"
            f"accept len: {al:.2f}, accept rate: {rate:.2f}, cuda graph: True, "
            f"gen throughput (token/s): 2400.00, #queue-req: 0")


PREFILL = ("[2026-01-12 10:00:30 TP0] Prefill batch, #new-seq: 8, #new-token: 8192, #cached-token: 0, "
           "token usage: 0.01, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, "
           "input throughput (token/s): 0.00")


def write_log(tmp_path, lines, name="server.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def sglang_resolves(flags: dict[str, str]) -> dict[str, int]:
    """What SGLang's speculative_hook.py makes of the written flags (the rules in the docstring)."""
    algo = flags["--speculative-algorithm"]
    tokens = int(flags["--speculative-num-draft-tokens"])
    if algo == "NGRAM":
        topk = int(flags.get("--speculative-ngram-max-bfs-breadth", 10))
        return {"steps": tokens // topk, "topk": topk, "tokens": tokens}
    steps, topk = int(flags["--speculative-num-steps"]), int(flags["--speculative-eagle-topk"])
    if topk == 1:
        tokens = steps + 1
    return {"steps": steps, "topk": topk, "tokens": tokens}


def flags_of(text: str) -> dict[str, str]:
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    argv = shlex.split(body.replace("\\\n", " "))
    return {a: (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else "")
            for i, a in enumerate(argv) if a.startswith("--")}


@pytest.mark.parametrize("mechanism, schedule, tree", [
    ("eagle3", ((1, 5), (16, 3)), None),   # adaptive, per-bucket D
    ("eagle3", ((1, 4),), None),            # fixed chain
    ("ngram", ((1, 4),), None),
    ("draft-model", ((1, 3),), None),
    ("mtp", ((1, 3),), None),
    ("eagle3-tree", ((1, 7),), {"topk": 8, "depth": 7, "nodes": 16}),
])
def test_sglang_keeps_the_written_settings(mechanism, schedule, tree):
    """SGLang silently rewrites num_draft_tokens that disagree with topk and steps; the written
    launch is already what it resolves to, and a tree verifies its nodes + the root."""
    extra = {"draft_model": "llama-3.2-1b"} if mechanism == "draft-model" else {}
    model = "deepseek-v3" if mechanism == "mtp" else "llama-3.1-8b"
    plan = ServingPlan(model=model, mechanism=mechanism, draft_len=schedule[0][1], schedule=schedule,
                       hardware="h100", tree=tree, **extra)
    files = render(plan)
    flags = flags_of(files["sglang_launch.sh"])
    resolved = sglang_resolves(flags)
    assert resolved["tokens"] == int(flags["--speculative-num-draft-tokens"])
    if tree:
        assert (resolved["steps"], resolved["topk"], resolved["tokens"]) == (7, 8, 17)
        assert tree["nodes"] + 1 <= tree["topk"] * tree["depth"] + 1  # bench_speculative.py's own bound
    else:
        assert resolved["topk"] == 1 and resolved["tokens"] - 1 == max(d for _, d in schedule)
    if "--speculative-adaptive" in flags:
        config = json.loads(files["sglang_adaptive_config.json"])
        candidates = {s for slot in config.values() for s in slot["candidate_steps"]}
        assert int(flags["--speculative-num-steps"]) in candidates


def test_the_log_of_a_written_launch_reads_back_at_its_draft_length(tmp_path):
    """Launch speedplan's ngram chain (breadth 1, D + 1 draft tokens: SGLang logs num_steps = D + 1)
    and an EAGLE-3 chain; their logs give back the launch's D, from the server_args line and from
    accept rate."""
    for algorithm, steps, tokens, d in (("NGRAM", 4, 4, 3), ("EAGLE3", 3, 4, 3)):
        lines = [server_args_line(steps, 1, tokens, algorithm), PREFILL,
                 decode_line(8, 2.80, 1.80 / d), decode_line(24, 2.50, 1.50 / d, it=" [1234]"),
                 decode_line(16, 2.65, 1.65 / d, usage="#full token: 100, full token usage: 0.01, "
                                                        "mamba num: 8, mamba usage: 0.02, ")]
        path = write_log(tmp_path, lines, f"{algorithm}.log")
        records = read_sglang_log(path)
        assert [r.line for r in records] == [3, 4, 5] and {r.draft_len for r in records} == {d}
        mean = (8 * 2.80 + 24 * 2.50 + 16 * 2.65) / 48
        assert mean_accept_length(records) == pytest.approx(mean)
        acc = parse_acceptance(str(path))
        assert f"D={d} from the log's server_args line" in acc.source
        assert parse_acceptance(f"{path}@{d}").positions == acc.positions  # @D that agrees: the same
        assert al_iid(acc.positions[0], d) == pytest.approx(mean, abs=1e-6)


@pytest.mark.parametrize("lines, words", [
    ([server_args_line(7, 8, 17), decode_line(8, 4.49, 3.49 / 16)],
     "server.log:2: the server ran a token tree (speculative_algorithm=EAGLE3, speculative_num_steps=7, speculative_eagle_topk=8"),
    ([server_args_line(4, 1, 9, "NGRAM"), decode_line(8, 1.6, 0.6 / 8)], "token tree"),  # more tokens than steps + 1
    ([server_args_line(7, 1, 8, adaptive=True), decode_line(8, 3.2, 2.2 / 7)],
     "server.log:2: the server ran --speculative-adaptive (server_args, line 1)"),
    ([server_args_line(7, 1, 8), decode_line(8, 3.2, 2.2 / 7),
      "[2026-01-12 10:01:00 TP0] Adaptive spec params updated: steps 7 -> 3 (ema_accept_len=1.80)",
      decode_line(8, 2.2, 1.2 / 7)], "server.log:3: the server ran --speculative-adaptive and changed"),
    ([server_args_line(3, 1, 4), decode_line(8, 2.6, 1.6 / 3), server_args_line(5, 1, 6),
      decode_line(8, 3.1, 2.1 / 5)], "server.log:4: the log holds launches with different settings (line 1"),
])
def test_logs_that_are_not_one_chain_are_refused_in_one_line(tmp_path, lines, words):
    """A tree's log read as a chain gave D = 16 (its nodes) and i.i.d. alpha 0.78 (2026 walkthrough);
    an adaptive or restarted server's lines mix draft lengths."""
    path = write_log(tmp_path, lines)
    with pytest.raises(SpeedplanInputError) as err:
        read_sglang_log(path)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_tree_log_through_the_sweep_is_exit_2_and_one_line(tmp_path, capsys):
    path = write_log(tmp_path, [server_args_line(7, 8, 17), PREFILL, decode_line(8, 4.49, 3.49 / 16)])
    code = run(["sweep", "--engine", "sglang", "--plan-for", "sglang", "--mechanism", "eagle3",
                "--acceptance", f"eagle3:{path}", "--out", str(tmp_path / "report")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "token tree" in err and "Traceback" not in err
    assert not (tmp_path / "report").exists()


def test_relaunches_with_the_same_settings_read_as_one(tmp_path):
    lines = [server_args_line(3, 1, 4), decode_line(8, 2.6, 0.53), server_args_line(3, 1, 4), decode_line(8, 2.8, 0.6)]
    records = read_sglang_log(write_log(tmp_path, lines))
    assert [r.accept_len for r in records] == [2.6, 2.8] and {r.draft_len for r in records} == {3}


def test_a_draft_length_the_log_contradicts_is_refused(tmp_path):
    """`server.log@5` on a launch that drafted 3 tokens a step was read at D = 5 (alpha 0.684
    where the launch gives 0.775)."""
    path = write_log(tmp_path, [server_args_line(3, 1, 4), decode_line(8, 2.80, 0.60)])
    with pytest.raises(SpeedplanInputError, match=r"server.log@5: the log's server_args line says the server drafted "
                                                  r"3 tokens a step; give "):
        parse_acceptance(f"{path}@5")


def test_a_log_without_accept_rate_takes_its_launchs_draft_length(tmp_path):
    """Before 0.5.23 the decode lines had no accept rate: the server_args line still gives D."""
    old = decode_line(8, 2.80, 0.60).replace("accept rate: 0.60, ", "")
    acc = parse_acceptance(str(write_log(tmp_path, [server_args_line(3, 1, 4), old])))
    assert "D=3 from the log's server_args line" in acc.source
    assert al_iid(acc.positions[0], 3) == pytest.approx(2.80, abs=1e-6)
    with pytest.raises(SpeedplanInputError, match="give the draft length as"):  # no server_args line either
        parse_acceptance(str(write_log(tmp_path, [old], "bare.log")))


def test_lines_before_the_first_launch_beside_a_launch_are_refused(tmp_path):
    """A log whose head was cut (decode lines of a launch it does not show) and a later relaunch:
    the first lines were read at the relaunch's D without a word."""
    path = write_log(tmp_path, [decode_line(8, 2.8, 0.6), server_args_line(5, 1, 6), decode_line(8, 3.1, 0.42)])
    with pytest.raises(SpeedplanInputError, match=r"server.log:1: a decode line before the log's first server_args"):
        parse_acceptance(str(path))


def test_launches_told_apart_by_their_algorithm_say_so():
    lines = [server_args_line(3, 1, 4, "EAGLE3"), decode_line(8, 2.6, 0.53), server_args_line(3, 1, 4, "EAGLE"),
             decode_line(8, 2.8, 0.6)]
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        with pytest.raises(SpeedplanInputError, match="speculative_algorithm=EAGLE, speculative_num_steps=3"):
            read_sglang_log(write_log(Path(d), lines))


@pytest.mark.parametrize("al, rate", [(2.50, 0.10), (2.00, 0.00), (2.00, 1.00), (1.00, 0.50)])
def test_an_accept_rate_that_contradicts_its_accept_len_is_refused(tmp_path, al, rate):
    """With the launch's D known, a chain's accept rate is (accept len - 1) / D from the same
    window's counters (both printed to two decimals); a rate of 0 or 1 beside an accept len that
    says otherwise was read in silence (stop 43's left-alone list)."""
    path = write_log(tmp_path, [server_args_line(3, 1, 4), decode_line(8, al, rate)])
    with pytest.raises(SpeedplanInputError, match=r"server\.log:2: accept len .* and accept rate .* disagree: with D = 3"):
        parse_acceptance(str(path))


@pytest.mark.parametrize("al, rate", [(2.50, 0.50), (1.00, 0.00), (3.97, 0.99), (2.21, 0.40)])
def test_an_accept_rate_that_agrees_within_rounding_is_read(tmp_path, al, rate):
    path = write_log(tmp_path, [server_args_line(3, 1, 4), decode_line(8, al, rate)])
    assert parse_acceptance(str(path)).source
