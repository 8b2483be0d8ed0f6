"""What `speedplan validate` prints after a run, and help texts a new user reads first."""

from typer.testing import CliRunner

from speedplan.cli.app import app
from speedplan.cli.validate import summary_lines


def _summary(**over):
    base = {"step_time_median_error": 0.042, "step_time_p90_error": 0.089, "al_median_error": 0.071,
            "speedup_median_error": 0.089, "max_regret": 0.085, "points": 10, "wall_s": 44.5,
            "round_spread_median": 0.0, "settled_again": 0, "settle_spread_median": 0.0,
            "timed_again": [["ngram", 1, 3], ["ngram", 2, 1], ["ngram", 2, 3]], "rounds": 1,
            "grid": {"rounds": 1, "settle_tolerance": 0.05}}
    return {**base, **over}


def test_quick_run_does_not_claim_a_spread_it_never_measured():
    """--quick times each point once: it used to print "first two rounds 0.0% apart" and "0 timed
    again" right after progress lines saying "again: ..." for three points."""
    lines = summary_lines(_summary())
    noise = lines[-1]
    assert noise.startswith("machine noise: not measured (one round a point")
    assert "0.0% apart" not in noise
    assert "3 points (each batch's pick and measured best) timed in two more rounds" in noise
    assert "the planner's pick loses against the best measured" in lines[2]


def test_full_run_reports_the_spread_and_both_kinds_of_retiming():
    lines = summary_lines(_summary(rounds=2, grid={"rounds": 2, "settle_tolerance": 0.05}, round_spread_median=0.09,
                                   settled_again=4, settle_spread_median=0.02, timed_again=[["eagle", 1, 3]]))
    assert lines[-1] == ("machine noise: a point's first two rounds 9.0% apart (median); 4 timed again until two "
                         "rounds agreed within 5.0%, 2.0% apart after; 1 point (each batch's pick and measured best) "
                         "timed in two more rounds before regret was read")
    lines = summary_lines(_summary(rounds=2, grid={"rounds": 2, "settle_tolerance": 0.05}, timed_again=[]))
    assert lines[-1].endswith("0.0% apart after")


def test_help_names_what_options_take():
    runner = CliRunner()
    sweep = " ".join(runner.invoke(app, ["sweep", "--help"]).output.split())
    assert "requests in flight per replica" in sweep and "SLO in tokens/s per user" in sweep
    run = " ".join(runner.invoke(app, ["run", "--help"]).output.split())
    assert "no eagle3, mtp or medusa here" in run
    ops = " ".join(runner.invoke(app, ["predict", "ops", "--help"]).output.split())
    assert "latency_us (microseconds)" in ops and "(causal or tree)" in ops
    validate = " ".join(runner.invoke(app, ["validate", "--help"]).output.split())
    assert "microbench/campaign.sh" in validate


def test_run_says_when_batch_exceeds_the_prompts():
    """`speedplan run --prompt hi --batch 4` decoded one sequence a step and printed B=4."""
    from speedplan.cli.run import batch_note

    assert batch_note(1, 4) == ("note: --batch 4 with 1 prompt: each step decodes 1 sequence, not 4 "
                                "(give at least 4 prompts, e.g. --prompts FILE.jsonl)")
    assert batch_note(4, 4) is None and batch_note(8, 4) is None and batch_note(0, 4) is None
