"""Audit leftovers mended in stop 59, each as a user met it: a memory figure printed as 21 digits, a
5,000-character --acceptance, --out or name echoed whole, and a draft model swept past the positions
its config holds with no word said."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from speedplan.cli.app import run
from speedplan.errors import clipped
from speedplan.units import gigabytes

ROOT = Path(__file__).resolve().parents[1]
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 128256, "rms_norm_eps": 1e-5}


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("speedplan: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("nbytes, text", [(85.5e9, "85.5 GB"), (99_999.94e9, "99,999.9 GB"), (99_999.96e9, "1.00e5 GB"), (4_414.2e9, "4,414.2 GB"), (0.0, "0.0 GB"),
                                          (3_201_639_328e9, "3.20e9 GB"), (8.0016394e28, "8.00e19 GB"),
                                          (-2e15, "-2.00e6 GB")])
def test_gigabytes_prints_a_real_device_plainly_and_an_absurd_figure_as_a_power_of_ten(nbytes, text):
    assert gigabytes(nbytes) == text


def test_gigabytes_keeps_the_digits_asked_and_prints_non_numbers_as_python_does():
    assert gigabytes(84.81234e9, 3) == "84.812 GB"
    assert gigabytes(math.inf) == "inf GB" and gigabytes(math.nan) == "nan GB"


def test_a_model_of_absurd_size_is_refused_with_readable_gigabytes(tmp_path, capsys):
    config = tmp_path / "huge.json"
    config.write_text(json.dumps({**LLAMA, "hidden_size": 1_000_000, "num_hidden_layers": 100_000,
                                  "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 4_000_000,
                                  "vocab_size": 32000, "max_position_embeddings": 8192}))
    assert run(["sweep", "--model", str(config), "--out", str(tmp_path / "out")]) == 2
    err = _one_line(capsys)
    assert "needs 3.20e9 GB per GPU (weights 3.20e9 GB)" in err and "3201639328" not in err
    assert not (tmp_path / "out").exists()


def test_clipped_keeps_short_text_and_shortens_long_text_to_its_ends():
    assert clipped("/tmp/out") == "/tmp/out"
    long = "a" * 100 + "MIDDLE" + "z" * 100
    shown = clipped(long)
    assert shown == "a" * 60 + "..." + "z" * 60 + " (206 characters)"


def test_a_spec_of_thousands_of_characters_is_refused_in_one_short_line(tmp_path, capsys):
    """It named a 5,006-character path: pathlib's is_file raised "File name too long", which the CLI
    printed with the name whole."""
    spec = "eagle=" + "x" * 5000
    assert run(["sweep", "--acceptance", spec, "--out", str(tmp_path / "o")]) == 2
    err = _one_line(capsys)
    assert "not alpha=, positions=, ranks=, al=A@D or an existing file" in err and len(err) < 300, len(err)
    assert run(["sweep", "--acceptance", "alpha=0.5," + "y" * 3000, "--out", str(tmp_path / "o")]) == 2
    assert "is not a number" in (err := _one_line(capsys)) and len(err) < 300, len(err)
    assert run(["sweep", "--acceptance", "alpha=" + "0.5," * 2000, "--out", str(tmp_path / "o")]) == 2
    assert "(8,006 characters): alpha takes one number" in (err := _one_line(capsys)) and len(err) < 300, len(err)


def test_an_out_path_longer_than_the_os_takes_is_named_by_its_ends(tmp_path, capsys):
    out = tmp_path / "/".join(["d" * 200] * 25)
    assert run(["sweep", "--out", str(out)]) == 2
    err = _one_line(capsys)
    assert "File name too long" in err and len(err) < 300 and "characters)" in err, err
    assert list(tmp_path.iterdir()) == []


def _draft(tmp_path, positions: int) -> Path:
    config = tmp_path / "draft.json"
    config.write_text(json.dumps({**LLAMA, "hidden_size": 2048, "num_hidden_layers": 16, "intermediate_size": 8192,
                                  "max_position_embeddings": positions, "tie_word_embeddings": True}))
    return config


def test_a_draft_swept_past_its_positions_on_published_acceptance_carries_a_caution(tmp_path, capsys):
    from speedplan.plan.sweep import sweep

    draft = f"draft-model:{_draft(tmp_path, 2048)}"
    result = sweep(mechanisms=[draft], batches=[1, 8], draft_lens=[0, 4], contexts=[4096])
    caution = result.meta["cautions"]["draft-model:draft"]
    assert "holds 2,048 positions" in caution and "need up to 4,105 (context 4,096, then 1 + k" in caution
    assert run(["sweep", "--mechanism", draft, "--batch", "1,8", "--out", str(tmp_path / "o")]) == 0
    assert "caution: draft-model:draft: its drafter holds 2,048 positions" in capsys.readouterr().out
    assert "caution: draft-model:draft" in (tmp_path / "o" / "report.html").read_text()
    # within its positions (2,039 + 1 + 2 x 4 = 2,048): nothing to say
    assert sweep(mechanisms=[draft], batches=[1], draft_lens=[0, 4], contexts=[2039]).meta["cautions"] == {}
    # with the user's own acceptance the caution stays (vLLM's rule follows the drafter, stop 60), without the
    # words on published figures
    own = sweep(mechanisms=[draft], batches=[1], draft_lens=[0, 4], contexts=[4096],
                acceptance={"draft-model": "alpha=0.7"}).meta["cautions"]["draft-model:draft"]
    assert "published" not in own
    # a draft that holds as many positions as the target: the sweep's D past the target's limit is not its fault
    assert sweep(mechanisms=["draft-model:llama-3.2-1b"], batches=[1], draft_lens=[0, 4],
                 contexts=[131072]).meta["cautions"] == {}


@pytest.mark.parametrize("option, says", [("--mechanism", "unknown mechanism"), ("--model", "unknown model"),
                                          ("--batch", "expected whole numbers"), ("--hardware", "unknown hardware"),
                                          # not a file the OS can look up: read as pairs and refused so (stop 60;
                                          # the OS's "File name too long" before)
                                          ("--batch-weights", "expected BATCH=WEIGHT pairs")])
def test_a_name_of_thousands_of_characters_is_echoed_short(option, says, tmp_path, capsys):
    assert run(["sweep", option, "q" * 5000, "--out", str(tmp_path / "o")]) == 2
    err = _one_line(capsys)
    assert says in err and len(err) < 600, (len(err), err[:200])
