"""vLLM /metrics scrapes: acceptance lengths from the per-position counters, and the scrapes refused."""

import pytest

from speedplan.engine.readers.measurements import read_measurements
from speedplan.errors import SpeedplanInputError


def test_metrics_scrape_gives_acceptance_to_rows_without_it(tmp_path):
    """A CSV of runs without acceptance lengths plus a /metrics scrape of the same server: AL at
    D is 1 + (accepted at positions 0..D-1) / drafts, e.g. D = 2: 1 + (90 + 70) / 100 = 2.6."""
    from speedplan.engine.readers.vllm_metrics import read_vllm_metrics
    from speedplan.engine.run_calibration import _scrape_acceptance, calibrate_files

    scrape = tmp_path / "metrics.txt"
    scrape.write_text(
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 90.0\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 70.0\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 50.0\n')
    runs = tmp_path / "runs.csv"
    runs.write_text("mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,7.5\neagle3,1,2,1024,5.0\n"
                    "eagle3,1,3,1024,4.6\n")
    rows = read_measurements(runs, acceptance=_scrape_acceptance([read_vllm_metrics(scrape)]))
    assert [m.acceptance_length for m in rows] == [None, pytest.approx(2.6), pytest.approx(3.1)]
    result = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [runs, scrape])
    assert len(result.rows) == 3 and "metrics.txt" in result.profile.fit["described"]
    assert not any("not used" in n for n in result.notes)
    # every row states its acceptance: the scrape goes unused, is said to, and is not named a source of the fit
    stated = tmp_path / "stated.csv"
    stated.write_text(runs.read_text().replace("tpot_ms\n", "tpot_ms,acceptance_length\n").replace("7.5\n", "7.5,\n")
                      .replace("5.0\n", "5.0,2.5\n").replace("4.6\n", "4.6,3.0\n"))
    result = calibrate_files("llama-3.1-8b", "h100-sxm", 1, "vllm", [stated, scrape])
    assert f"{scrape}: not used: every run states its own acceptance length" in result.notes
    assert "metrics.txt" not in result.profile.fit["described"]
    with pytest.raises(SpeedplanInputError, match="draft positions"):
        _scrape_acceptance([read_vllm_metrics(scrape)])("eagle3", 5)


def test_a_scrape_of_two_models_or_for_a_tree_row_is_refused(tmp_path):
    """Two servers' scrapes in one file were summed, and a chain's per-position counters stood
    in for a tree's acceptance (until 2026-12-03); two engines of one model are summed, rightly."""
    from speedplan.engine.readers.vllm_metrics import read_vllm_metrics
    from speedplan.engine.run_calibration import _scrape_acceptance

    one = ('vllm:spec_decode_num_drafts_total{engine="E",model_name="M"} 100.0\n'
           'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="E",model_name="M",position="0"} 80.0\n')
    scrape = tmp_path / "metrics.txt"
    scrape.write_text(one.replace("E", "0").replace("M", "m") + one.replace("E", "1").replace("M", "m"))
    assert read_vllm_metrics(scrape).position_rates == pytest.approx((0.8,))
    with pytest.raises(SpeedplanInputError, match="rows of eagle3-tree:topk=4 need their own acceptance_length"):
        _scrape_acceptance([read_vllm_metrics(scrape)])("eagle3-tree:topk=4", 3)
    scrape.write_text(one.replace("E", "0").replace("M", "a") + one.replace("E", "0").replace("M", "b"))
    with pytest.raises(SpeedplanInputError, match="series of 2 models \\(a, b\\)"):
        read_vllm_metrics(scrape)


def test_a_scrape_whose_drafts_ran_short_or_that_predates_the_counters_says_so(tmp_path):
    from speedplan.engine.readers.vllm_metrics import read_vllm_metrics
    from speedplan.engine.run_calibration import _scrape_acceptance

    scrape = tmp_path / "metrics.txt"
    body = ('vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0\n'
            'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} TOKENS\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 80.0\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 40.0\n')
    scrape.write_text(body.replace("TOKENS", "198.0"))  # two drafts cut short at their requests' ends
    assert _scrape_acceptance([read_vllm_metrics(scrape)])("eagle3", 2) == pytest.approx(2.2)
    scrape.write_text(body.replace("TOKENS", "150.0"))  # K varied with the batch: 1.5 tokens per draft
    acceptance = _scrape_acceptance([read_vllm_metrics(scrape)])
    with pytest.raises(SpeedplanInputError, match=r"drafted 1\.50 tokens per draft .* draft length varied"):
        acceptance("eagle3", 2)
    assert acceptance("ngram", 2) == pytest.approx(2.2)  # an n-gram drafter proposes what it matches
    scrape.write_text("vllm:spec_decode_draft_acceptance_rate 0.6\nvllm:spec_decode_num_emitted_tokens_total 900.0\n")
    with pytest.raises(SpeedplanInputError, match=r"from 0\.8\.5 on \(PR #16665\)"):
        read_vllm_metrics(scrape)


def test_a_scrape_of_a_server_without_speculation_says_so(tmp_path):
    """Its vllm: metrics but no spec_decode counters: it was read as an unknown file."""
    from speedplan.plan.acceptance_sources import parse_acceptance

    f = tmp_path / "metrics.txt"
    f.write_text('# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3.0\n')
    for read in (read_measurements, lambda p: parse_acceptance(str(p))):
        with pytest.raises(SpeedplanInputError, match="no vllm:spec_decode_\\* counters: that server ran without "
                                                      "speculative decoding"):
            read(f)
