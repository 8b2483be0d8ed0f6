"""Mechanism names as users and the engines write them (EAGLE-3, draft_model, NEXTN,
deepseek_mtp): one table (speedplan.plan.mechanism_names) for sweep, --acceptance and
calibrate's files."""

from __future__ import annotations

import pandas as pd
import pytest

from speedplan.cli.app import run
from speedplan.engine.readers.measurement import canonical_mechanism
from speedplan.errors import SpeedplanInputError
from speedplan.plan.mechanism_names import canonical_name, canonical_spec
from speedplan.plan.mechanisms import MECHANISMS, mechanism_class
from speedplan.plan.sweep import sweep


@pytest.mark.parametrize("given, name", [("EAGLE-3", "eagle3"), ("eagle_3", "eagle3"), (" Eagle3 ", "eagle3"),
                                         ("draft_model", "draft-model"), ("STANDALONE", "draft-model"),
                                         ("NEXTN", "mtp"), ("deepseek_mtp", "mtp"), ("EAGLE", "eagle"),
                                         ("n-gram", "ngram"), ("EAGLE3-TREE", "eagle3-tree"), ("off", "none"),
                                         ("baseline", "none"), ("medusa", "medusa")])
def test_names_map_to_speedplans(given, name):
    assert canonical_name(given) == name
    assert canonical_mechanism(given) == name  # calibrate's readers use the same table


def test_every_alias_names_a_registered_mechanism():
    from speedplan.plan.mechanism_names import ALIASES

    assert set(ALIASES.values()) <= set(MECHANISMS)
    assert not set(ALIASES) & set(MECHANISMS)  # an alias never hides a mechanism's own name


def test_options_after_the_colon_are_kept():
    assert canonical_spec("Draft_Model:llama-3.2-1b,tp=1") == "draft-model:llama-3.2-1b,tp=1"
    assert canonical_spec("EAGLE-3:config=/Some/Path.json") == "eagle3:config=/Some/Path.json"


def test_plain_decoding_and_unknown_names_are_refused_as_given():
    with pytest.raises(SpeedplanInputError, match="'Off' is plain decoding"):
        mechanism_class("Off")
    with pytest.raises(SpeedplanInputError, match="unknown mechanism 'EAGLE-4'"):
        mechanism_class("EAGLE-4")


def test_sweep_by_alias_prices_what_the_name_prices():
    by_alias = sweep(model="llama-3.1-8b", hardware="h100-sxm", batches=[1, 64], draft_lens=[0, 2, 4],
                     mechanisms=["EAGLE-3", "draft_model"], acceptance={"EAGLE-3": "alpha=0.7"})
    by_name = sweep(model="llama-3.1-8b", hardware="h100-sxm", batches=[1, 64], draft_lens=[0, 2, 4],
                    mechanisms=["eagle3", "draft-model"], acceptance={"eagle3": "alpha=0.7"})
    pd.testing.assert_frame_equal(by_alias.frame, by_name.frame)
    assert (by_alias.frame.loc[by_alias.frame.mechanism == "eagle3", "acceptance_source"] == "user: alpha=0.7").all()


def test_cli_by_alias(tmp_path, capsys):
    assert run(["sweep", "--mechanism", "EAGLE-3", "--acceptance", "EAGLE-3:alpha=0.7", "--batch", "1,64",
                "--out", str(tmp_path / "a")]) == 0
    first = capsys.readouterr().out
    assert run(["sweep", "--mechanism", "eagle3", "--acceptance", "eagle3:alpha=0.7", "--batch", "1,64",
                "--out", str(tmp_path / "b")]) == 0
    second = capsys.readouterr().out
    assert "eagle3" in first and "user: alpha=0.7" in first
    assert first.replace(str(tmp_path / "a"), "") == second.replace(str(tmp_path / "b"), "")
    for name in ("sweep.csv", "schedule.csv"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()


def test_cli_tree_nodes_with_an_aliased_tree(tmp_path):
    assert run(["sweep", "--mechanism", "EAGLE-3-tree", "--tree-nodes", "16", "--batch", "1",
                "--out", str(tmp_path / "t")]) == 0


def test_cli_plain_decoding_as_a_mechanism_is_exit_2(tmp_path, capsys):
    assert run(["sweep", "--mechanism", "baseline", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "'baseline' is plain decoding" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
