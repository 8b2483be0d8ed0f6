"""A `vllm bench serve` result's `spec_decode_per_position_acceptance_rates` (vllm/benchmarks/serve.py,
commit 009e6d4a1cd6, `benchmark`: each position's accepted count over the drafts, from the
server's /metrics before and after the run) gives its acceptance length where it has no
`spec_decode_acceptance_length`: AL = 1 + Σ rates, vLLM's own definition. Where it has both,
they agree (vLLM writes both from one scrape) within the rounding of vLLM's printout."""

import json

import pytest

from speedplan.engine.readers.measurements import read_measurements
from speedplan.errors import SpeedplanInputError

# A `vllm bench serve --save-result` run with --metadata (as tests/engine's other vLLM runs).
VLLM_RUN = {"date": "20261201-101010", "model_id": "meta-llama/Llama-3.1-8B-Instruct", "max_concurrency": 16,
            "num_prompts": 320, "output_throughput": 2210.5, "mean_tpot_ms": 6.9, "median_tpot_ms": 6.8,
            "spec_decode_acceptance_length": 2.71, "spec_decode_num_drafts": 1000,
            "mechanism": "eagle3", "draft_len": 3, "context": 1500}

RATES = [0.82, 0.56, 0.33]  # AL 2.71


def _read(tmp_path, **change):
    f = tmp_path / "run.json"
    f.write_text(json.dumps({k: v for k, v in (VLLM_RUN | change).items() if v is not None}))
    return f, read_measurements(f)


def test_per_position_rates_give_the_acceptance_length_where_the_result_has_none(tmp_path):
    _, (m,) = _read(tmp_path, spec_decode_acceptance_length=None, spec_decode_per_position_acceptance_rates=RATES)
    assert m.acceptance_length == pytest.approx(2.71)
    assert m._f("acceptance_length") == "'spec_decode_per_position_acceptance_rates'"


def test_both_read_the_acceptance_length_and_agree_within_vllms_rounding(tmp_path):
    _, (m,) = _read(tmp_path, spec_decode_per_position_acceptance_rates=[0.8214, 0.5612, 0.3301])  # 2.7127
    assert (m.acceptance_length, m._f("acceptance_length")) == (2.71, "'spec_decode_acceptance_length'")


def test_a_metadata_acceptance_length_still_comes_before_the_rates(tmp_path):
    _, (m,) = _read(tmp_path, spec_decode_acceptance_length=None, acceptance_length=2.5,
                    spec_decode_per_position_acceptance_rates=RATES)
    assert m.acceptance_length == 2.5


@pytest.mark.parametrize("change, word", [
    ({"spec_decode_per_position_acceptance_rates": [0.6, 0.4, 0.2]},
     "field 'spec_decode_acceptance_length' 2.71 contradicts 'spec_decode_per_position_acceptance_rates' (1 + their "
     "sum = 2.2)"),
    ({"spec_decode_per_position_acceptance_rates": "0.82,0.56"},
     "field 'spec_decode_per_position_acceptance_rates' must be a list of per-position acceptance rates"),
    ({"spec_decode_per_position_acceptance_rates": [0.82, 1.3]},
     "field 'spec_decode_per_position_acceptance_rates' position 1 must be a rate in 0..1"),
    ({"spec_decode_per_position_acceptance_rates": [0.5, 0.7]},
     "field 'spec_decode_per_position_acceptance_rates' position 1 (0.7) exceeds position 0 (0.5)"),
    ({"spec_decode_per_position_acceptance_rates": [0.8, "x"]},
     "field 'spec_decode_per_position_acceptance_rates' must be a number"),
    ({"spec_decode_acceptance_length": None, "spec_decode_per_position_acceptance_rates": []},
     "field 'acceptance_length' is needed for a speculative row: the file has no spec_decode_acceptance_length"),
])
def test_bad_or_contradicting_rates_are_refused_naming_file_run_and_field(tmp_path, change, word):
    with pytest.raises(SpeedplanInputError) as e:
        _read(tmp_path, **change)
    assert str(e.value).startswith(f"{tmp_path / 'run.json'}:run 1: ") and word in str(e.value), str(e.value)
