"""Inputs mended in stop 44: a hardware file's platform written as the vendors write it
("ROCm", "CUDA"), and a hardware file whose name, description or source is empty (every
figure says where it came from, so a device with no source is refused, not listed)."""

from __future__ import annotations

import json

import pytest

from speedplan.cli.app import run
from speedplan.specs.hardware import PRESET_DIR as HARDWARE, load_hardware_file
from tests._heads import long_heads

SMALL = ["sweep", "--batch", "1,8", "--mechanism", "ngram", "--draft-len", "0-2"]


def _mi300x_file(tmp_path, **changes):
    data = json.loads((HARDWARE / "mi300x.json").read_text())
    data.update(name="my-mi300x", **changes)
    f = tmp_path / "hw.json"
    f.write_text(json.dumps(data))
    return f


@pytest.mark.parametrize("written", ["ROCm", "ROCM", " rocm ", {"value": "ROCm", "source": "AMD's stack"}])
def test_a_platform_as_vendors_write_it_is_read(tmp_path, written):
    assert load_hardware_file(_mi300x_file(tmp_path, platform=written)).platform == "rocm"


def test_a_capitalised_platform_still_keeps_trtllm_off_an_amd_gpu(tmp_path, capsys):
    out = tmp_path / "r"
    assert run(SMALL + ["--hardware", str(_mi300x_file(tmp_path, platform="ROCm")), "--out", str(out)]) == 0
    assert "trtllm  not planned: trtllm runs on cuda only, and my-mi300x is a rocm device" in capsys.readouterr().out
    assert not any(p.name.startswith("trtllm") for p in out.iterdir())


@pytest.mark.parametrize("written", ["Metal", "", 3])
def test_an_unknown_platform_is_still_refused(tmp_path, capsys, written):
    f = _mi300x_file(tmp_path, platform=written)
    out = tmp_path / "r"
    assert run(SMALL + ["--hardware", str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "platform must be one of" in err and not out.exists()


@pytest.mark.parametrize("field, words", [("name", "name is empty"), ("description", "description is empty; say what"),
                                          ("source", "source is empty; say where its numbers come from")])
@pytest.mark.parametrize("blank", ["", "   ", "\t"])
def test_a_hardware_file_with_empty_text_is_refused(tmp_path, capsys, field, words, blank):
    f = _mi300x_file(tmp_path)
    data = json.loads(f.read_text())
    data[field] = blank
    f.write_text(json.dumps(data))
    out = tmp_path / "r"
    assert run(SMALL + ["--hardware", str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and f"{f}: {words}" in err and not out.exists(), err


def test_a_hardware_file_named_like_a_preset_is_named_by_its_file(tmp_path, capsys):
    """A file of one's own may keep a preset's name with other numbers: the first line, meta.json
    and the report say which file priced it; a preset or a profile folder has no such note."""
    data = json.loads((HARDWARE / "h100-sxm.json").read_text())
    data["hbm_bytes_per_s"]["value"] /= 2
    f = tmp_path / "slow-h100.json"
    f.write_text(json.dumps(data))
    out = tmp_path / "r"
    assert run(SMALL + ["--hardware", str(f), "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"speedplan: llama-3.1-8b on h100-sxm ({f.resolve()}), TP=1"), first
    assert json.loads((out / "meta.json").read_text())["hardware_file"] == str(f.resolve())
    assert f"({f.resolve()})" in (out / "report.html").read_text()
    preset = tmp_path / "p"
    assert run(SMALL + ["--out", str(preset)]) == 0
    assert capsys.readouterr().out.startswith("speedplan: llama-3.1-8b on h100-sxm, TP=1")
    assert json.loads((preset / "meta.json").read_text())["hardware_file"] == ""


def test_a_rate_per_user_under_an_engine_cap_is_marked_with_the_rate_per_offered_request(tmp_path, capsys):
    """Under SGLang's 48-request cap a B = 64 step runs 48 requests and 16 wait: the table's
    tok/s/user is a running request's, marked ^, and the note gives it per offered request
    (the same tokens over all 64); uncapped rows carry no mark and no note is printed for them."""
    out = tmp_path / "r"
    argv = ["sweep", "--engine", "sglang", "--mechanism", *long_heads("eagle3"), "--batch", "8,64", "--draft-len", "0-3"]
    assert run(argv + ["--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = {line.split()[0]: line.split() for line in lines[2:4]}
    assert not row["8"][5].endswith("^") and row["64"][5].endswith("^"), lines[:4]
    running = float(row["64"][5].rstrip("^"))
    note = next(line for line in lines if line.startswith("note: tok/s/user marked ^"))
    assert "a step runs 48 requests there" in note
    assert f"{running * 48 / 64:,.1f} at B = 64" in note
    assert "tok/s/user marked ^" in (out / "report.html").read_text()
    assert run(SMALL + ["--out", str(tmp_path / "v")]) == 0  # vLLM: no cap, no mark, no note
    assert "^" not in capsys.readouterr().out


def test_engines_shows_a_named_profile_or_file_in_full(tmp_path, capsys):
    """`speedplan engines PROFILE...` prints each profile with every term's value, unit and source
    (a calibrate output could not be listed: "unexpected extra argument"); a bad one is exit 2."""
    from speedplan.engine.profile import TERMS, get_engine

    assert run(["engines", "vllm"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("engine profile vllm (vLLM")
    vllm = get_engine("vllm")
    for name in TERMS:
        line = next(line for line in printed.splitlines() if line.split()[:1] == [name])
        assert f"[{TERMS[name].unit}]: {vllm.terms[name].source[:40]}" in line
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({**vllm.to_json(), "name": "mine"}))
    assert run(["engines", str(mine), "sglang"]) == 0
    printed = capsys.readouterr().out
    assert f"engine profile mine (file {mine}; vLLM" in printed and "\nengine profile sglang (SGLang" in printed
    assert run(["engines", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such engine profile file" in err


def test_the_engine_line_says_when_the_profile_was_fitted_on_another_setting(tmp_path, capsys):
    """A profile calibrated on one model, GPU and TP prices another with no word of it (the calibrate
    walkthrough's finding 12): the engine line now names the fitted rows' settings where none is the
    sweep's; the shipped vllm profile's rows ran on the default sweep's, which says nothing more."""
    assert run(SMALL + ["--out", str(tmp_path / "d")]) == 0
    engine = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("engine:"))
    assert "its fitted rows ran on" not in engine
    meta = json.loads((tmp_path / "d" / "meta.json").read_text())
    assert meta["engine_fitted_settings"] == ["llama-3.1-8b on h100-sxm, TP=1"]
    assert run(SMALL + ["--model", "qwen3-32b", "--out", str(tmp_path / "q")]) == 0
    engine = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("engine:"))
    assert ("its fitted rows ran on llama-3.1-8b on h100-sxm, TP=1, not on qwen3-32b on h100-sxm, TP=1: its host "
            "and launch terms may carry over") in engine
    assert "its fitted rows ran on llama-3.1-8b" in (tmp_path / "q" / "report.html").read_text()


def test_the_cap_note_keeps_to_the_rows_shown_and_the_slo_pick_marks_a_capped_rate(tmp_path, capsys):
    """The ^ note named batch sizes the cut table did not show and no context where several are
    swept; the SLO pick printed a capped rate without its mark (review of stop 44)."""
    argv = ["sweep", "--engine", "sglang", "--mechanism", *long_heads("eagle3"), "--draft-len", "0-3"]
    assert run(argv + ["--context", "1024,4096", "--out", str(tmp_path / "c")]) == 0
    lines = capsys.readouterr().out.splitlines()
    shown = {int(line.split()[0]) for line in lines[2:] if line[:3].strip().isdigit()}
    note = next(line for line in lines if line.startswith("note: tok/s/user marked ^"))
    assert "(context 1024)" in note and "(context 4096)" in note
    for b in (64, 128, 256):
        assert (f"at B = {b} (context" in note) == (b in shown), (b, shown, note)
    assert run(argv + ["--batch", "8,64", "--min-tokens-per-user", "50", "--out", str(tmp_path / "s")]) == 0
    slo = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("SLO pick"))
    assert "at B=64" in slo and "tokens/s/user^ (a running request's: a step runs 48 of the 64, the rest wait)" in slo
