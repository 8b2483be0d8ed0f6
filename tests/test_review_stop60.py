"""Stop 60's mends of carried leftovers: an unknown option's line, and long names in the last paths that gave
the OS's line (or echoed thousands of characters)."""

from __future__ import annotations

import pytest

from speedplan.cli.app import run


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("speedplan: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("argv, says", [
    # Click compared whole names, so the shared "--" made --model and --tp look close to --nope
    (["sweep", "--nope"], "no such option: '--nope'; speedplan sweep --help lists them"),
    (["sweep", "--modle", "x"], "no such option: '--modle' (did you mean '--model'?); speedplan sweep --help"),
    (["calibrate", "--enigne", "vllm"], "(did you mean '--engine'?); speedplan calibrate --help lists them"),
    (["profile", "check", "--jsn", "x"], "(did you mean '--json'?); speedplan profile check --help lists them"),
])
def test_an_unknown_option_gets_a_close_name_or_none_and_the_commands_help(argv, says, capsys):
    assert run(argv) == 2
    line = _one_line(capsys)
    assert says in line and "Possible options" not in line


LONG = "q" * 5000


@pytest.mark.parametrize("option, says", [
    (["--batch-weights", LONG], "--batch-weights 'qqq"),
    (["--mechanism", f"draft-model:{LONG}"], "(5,000 characters): the draft model: unknown model"),
    (["--mechanism", f"eagle3:{LONG}.json"], "(5,005 characters): cannot read (File name too long)"),
    (["--mechanism", f"eagle3:config={LONG}"], "eagle3 head config qqq"),
])
def test_a_name_longer_than_the_os_takes_gets_its_own_short_refusal(option, says, tmp_path, capsys):
    assert run(["sweep", *option, "--batch", "1", "--out", str(tmp_path / "o")]) == 2
    line = _one_line(capsys)
    assert says in line and len(line) < 700, line
    assert not (tmp_path / "o").exists()


def test_an_absurd_parameter_count_prints_as_a_power_of_ten(tmp_path, capsys):
    """"1591361216.0B parameters" (ten digits of an absurd config) now reads as memory figures do (units.billions)."""
    import json

    from speedplan.units import billions

    assert (billions(8.03e9), billions(405.8e9, 2), billions(3.2e18)) == ("8.0B", "405.80B", "3.20e9B")
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
                                "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 1048576,
                                "num_hidden_layers": 100000, "intermediate_size": 4194304}))
    assert run(["sweep", "--mechanism", f"draft-model:{huge}", "--out", str(tmp_path / "o")]) == 2
    line = _one_line(capsys)
    assert "(1.59e9B parameters) is not smaller than the target llama-3.1-8b (8.0B)" in line
