"""Measurement files as files: CSV columns and quotes, JSON syntax, and bad files refused in one line."""

import json

import pytest

from speedplan.engine.readers.measurements import read_measurements
from speedplan.errors import SpeedplanInputError
from tests.engine._readers_helpers import SGLANG, VLLM_RUN

GOOD_CSV = "mechanism,batch,draft_len,context,tpot_ms,acceptance_length\nnone,1,0,1024,7.0,\neagle3,1,3,1024,4.0,2.8\n"


def test_a_csv_may_state_the_servers_running_request_cap(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text("mechanism,batch,draft_len,context,speedup,acceptance_length,max_running_requests\n"
                 "eagle3,64,3,1024,1.2,2.5,64\neagle3,32,3,1024,1.3,2.5,\n")
    capped, default = read_measurements(f)
    assert capped.max_running == 64 and default.max_running is None
    f.write_text("mechanism,batch,draft_len,context,speedup,acceptance_length,max_running_requests\n"
                 "eagle3,64,3,1024,1.2,2.5,0\n")
    with pytest.raises(SpeedplanInputError, match=r"runs.csv:2: field 'max_running_requests' must be in 1\.\.65536"):
        read_measurements(f)


def test_unrecognised_file(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    with pytest.raises(SpeedplanInputError, match="not a measurements CSV"):
        read_measurements(f)


def test_a_quote_left_open_is_named_at_the_row_it_opens(tmp_path):
    """An unclosed quote swallowed the rest of the file into one cell, and the error named a
    missing field; it now names the row where the quote opens."""
    f = tmp_path / "m.csv"
    f.write_text('mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,7.0\n"eagle3,8,3,1024,5.0\n'
                 "eagle3,8,3,1024,5.0\n")
    with pytest.raises(SpeedplanInputError, match=r"m.csv:3: cannot read \(unexpected end of data; a quote opened there"):
        read_measurements(f)
    f.write_text('mechanism,batch,draft_len,context,tpot_ms\nnone,1,0,1024,"7.0"\n')  # a closed quote is fine
    assert read_measurements(f)[0].value == 7.0


def test_a_folder_given_for_a_file_says_so(tmp_path):
    from speedplan.engine.profile import get_engine

    with pytest.raises(SpeedplanInputError, match="is a folder; give its files"):
        read_measurements(tmp_path)
    with pytest.raises(SpeedplanInputError, match="is a folder; give the engine profile's JSON file"):
        get_engine(str(tmp_path))


@pytest.mark.parametrize("name, text, word", [
    ("dup.csv", "mechanism,batch,draft_len,context,tpot_ms,batch\nnone,1,0,1024,7.0,5\n", "column 'batch' appears twice"),
    ("typo.csv", GOOD_CSV.replace("acceptance_length", "acceptance_lenght"), "did you mean 'acceptance_length'"),
    ("extra.csv", GOOD_CSV + "eagle3,1,3,1024,4.0,2.8,extra,more\n", "4: 8 cells for 6 columns"),
    ("huge.csv", GOOD_CSV.replace("7.0", "1e300"), "is not a plausible measurement"),
    ("plain_tree.csv", "mechanism,batch,draft_len,context,tpot_ms,tree_nodes\nnone,1,0,1024,7.0,5\n", "on a plain row"),
    ("deep.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("empty.json", "[]", "an empty JSON list"),
    ("plain_d.json", json.dumps({**VLLM_RUN, "mechanism": "none", "spec_decode_num_drafts": 0}), "'draft_len' is 3 for mechanism 'none'"),
    ("mech5.json", json.dumps({**VLLM_RUN, "mechanism": 5}), "field 'mechanism' must be text"),
    ("conc0.json", json.dumps({**VLLM_RUN, "max_concurrency": 0}), "field 'max_concurrency' must be in 1..65536"),
    ("true.json", json.dumps({**VLLM_RUN, "max_concurrency": True}), "field 'max_concurrency' must be a number"),
    ("ctx0.jsonl", json.dumps({**SGLANG, "context": 0}), "field 'context' must be in 1.."),
    ("topk0.jsonl", json.dumps({**SGLANG, "topk": 0}), "field 'topk' must be 1 or more"),
    ("bs0.jsonl", json.dumps({**SGLANG, "batch_size": 0}), "field 'batch_size' must be in 1..65536"),
    ("steps.jsonl", json.dumps({**SGLANG, "steps": -2}), "field 'steps' must be 0 or more"),
    ("nodes.jsonl", json.dumps({**SGLANG, "topk": 4, "num_draft_tokens": 1}), "leaves a tree of topk 4 no draft node"),
])
def test_bad_measurement_files_name_the_file_row_and_field_as_the_file_calls_it(tmp_path, name, text, word):
    """Each was read, coerced or a traceback until 2026-12-03 (an audit of calibrate's inputs)."""
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(SpeedplanInputError, match=word) as e:
        read_measurements(f)
    assert str(e.value).startswith(str(f)) and "\n" not in str(e.value)


def test_a_csv_is_told_by_its_content_and_excels_byte_order_mark_is_read(tmp_path):
    for name, text in (("runs.txt", GOOD_CSV), ("runs", GOOD_CSV), ("bom.csv", "\ufeff" + GOOD_CSV)):
        f = tmp_path / name
        f.write_text(text, encoding="utf-8")
        plain, spec = read_measurements(f)
        assert (plain.mechanism, spec.mechanism, spec.acceptance_length) == ("none", "eagle3", 2.8)
    (tmp_path / "bom.json").write_text("\ufeff" + json.dumps(VLLM_RUN), encoding="utf-8")
    assert read_measurements(tmp_path / "bom.json")[0].batch == 16


def test_a_column_beside_the_one_it_resembles_and_empty_trailing_headers_are_the_users(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text("mechanism,batch,draft_len,context,step_ms,step_us,,\nnone,1,0,1024,7.0,7000,,\n")
    (m,) = read_measurements(f)
    assert (m.quantity, m.value) == ("step_ms", 7.0)


def test_a_json_syntax_error_names_its_line_and_column(tmp_path):
    f = tmp_path / "run.json"
    f.write_text('{"output_throughput": 5, "mechanism": "none\n')
    with pytest.raises(SpeedplanInputError, match=r"malformed JSON \(Unterminated string starting at line 1, column 39\)"):
        read_measurements(f)


def test_a_csv_may_mix_quantities_one_per_row(tmp_path):
    """The README's calibrate_rows example (a TPOT row beside speedup rows) could not be saved as one
    CSV: "needs exactly one of the columns" (audit of 2026-12-04). A row filling two is refused."""
    f = tmp_path / "runs.csv"
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,speedup,acceptance_length\n"
                 "none,1,0,1024,7.0,,\neagle3,8,3,1024,,1.6,2.7\n")
    plain, spec = read_measurements(f)
    assert (plain.quantity, spec.quantity, spec.value) == ("tpot_ms", "speedup", 1.6)
    f.write_text("mechanism,batch,draft_len,context,tpot_ms,speedup,acceptance_length\neagle3,8,3,1024,5.0,1.6,2.7\n")
    with pytest.raises(SpeedplanInputError, match=r"runs.csv:2: needs exactly one of the fields .* found tpot_ms, speedup"):
        read_measurements(f)
