"""Rows of one configuration that contradict each other, as repeats or as two quantities, are refused."""

import pytest

from speedplan.errors import SpeedplanInputError


def test_repeated_rows_that_contradict_each_other_are_refused(tmp_path):
    """The same configuration measured 3x apart is a mislabelled row, not noise: exit 2 naming both
    rows; repeats a few percent apart, or rows with another acceptance length, are kept."""
    from speedplan.engine.readers.measurements import check_consistent, read_measurements

    f = tmp_path / "m.csv"
    f.write_text("mechanism,batch,draft_len,context,speedup,acceptance_length\n"
                 "eagle3,1,3,1024,1.5,2.5\neagle3,1,3,1024,1.4,2.52\neagle3,1,3,1024,0.9,1.4\n")
    check_consistent(read_measurements(f))
    f.write_text(f.read_text() + "eagle3,1,3,1024,0.5,2.5\n")
    with pytest.raises(SpeedplanInputError, match=r"m.csv:5: field 'speedup' 0.5 contradicts .*m.csv:2 \(1.5\)"):
        check_consistent(read_measurements(f))


def test_two_quantities_of_one_configuration_that_imply_other_steps_are_refused(tmp_path):
    """A TPOT in one file and an aggregate tokens/s in another for the same configuration imply
    an engine step each (tpot × AL; batch × AL / tokens/s): 10 ms a token at AL 3 is a 30 ms step,
    2400 tokens/s over 8 sequences at AL 3 a 10 ms one. 3x apart is a contradiction, named with
    both rows; the same figures 1.3x apart, or under another cap on running requests, are not."""
    from speedplan.engine.readers.measurements import check_consistent, implied_step_ms, read_measurements

    a, c = tmp_path / "a.csv", tmp_path / "c.csv"
    a.write_text("mechanism,batch,draft_len,context,tpot_ms,acceptance_length\neagle3,8,3,2048,10,3.0\n")
    c.write_text("mechanism,batch,draft_len,context,tokens_per_s,acceptance_length\neagle3,8,3,2048,2400,3.0\n")
    rows = read_measurements(a) + read_measurements(c)
    assert [implied_step_ms(m) for m in rows] == pytest.approx([30.0, 10.0])
    with pytest.raises(SpeedplanInputError, match=r"c.csv:2: field 'tokens_per_s' 2400 contradicts .*a.csv:2 "
                                                  r"\(tpot_ms 10\).*as engine steps: 10 ms here, 30 ms there; "
                                                  r"output throughput also counts prefill"):
        check_consistent(rows)
    c.write_text(c.read_text().replace("2400", "1000"))  # a 24 ms step: within 1.5x
    check_consistent(read_measurements(a) + read_measurements(c))
    # SGLang's cap: 64 in flight, 48 running: 18000 tokens/s at AL 3 is an 8 ms step (10.7 ms if all
    # 64 ran), against a 6 ms step measured: consistent under the cap, not without it
    from speedplan.engine.readers.measurements import Measurement

    both = [Measurement("eagle3", 64, 3, 2048, "step_ms", 6.0, 3.0, "s.csv:2"),
            Measurement("eagle3", 64, 3, 2048, "tokens_per_s", 18000.0, 3.0, "t.csv:2")]
    check_consistent(both, spec_cap=48)
    with pytest.raises(SpeedplanInputError, match="t.csv:2: field 'tokens_per_s' 18000 contradicts s.csv:2"):
        check_consistent(both)
    # the run's own cap decides, above the profile's; one above the batch caps nothing
    own = [both[0], Measurement("eagle3", 64, 3, 2048, "tokens_per_s", 18000.0, 3.0, "u.csv:2", max_running=48)]
    check_consistent(own)
    with pytest.raises(SpeedplanInputError, match="u.csv:2"):  # 64 ran: a 10.7 ms step against 6
        check_consistent([Measurement("eagle3", 64, 3, 2048, "step_ms", 6.0, 3.0, "s.csv:2", max_running=100),
                          Measurement("eagle3", 64, 3, 2048, "tokens_per_s", 18000.0, 3.0, "u.csv:2",
                                      max_running=100)], spec_cap=48)
    # plain steps are not capped: 128 sequences at 21333 tokens/s is a 6 ms step (2.25 ms if 48 ran)
    check_consistent([Measurement("none", 128, 0, 2048, "step_ms", 6.0, None, "p.csv:2"),
                      Measurement("none", 128, 0, 2048, "tokens_per_s", 21333.0, None, "q.csv:2")], spec_cap=48)
    # each row is checked against every earlier row of its configuration, whatever the first one was:
    # steps of 14 and 20 ms agree, and 10 ms agrees with the first, not the second
    rows = [Measurement("eagle3", 8, 3, 2048, "tpot_ms", 7.0, 2.0, "r.csv:2"),
            Measurement("eagle3", 8, 3, 2048, "tpot_ms", 10.0, 2.0, "r.csv:3"),
            Measurement("eagle3", 8, 3, 2048, "tokens_per_s", 2400.0, 3.0, "r.csv:4")]
    with pytest.raises(SpeedplanInputError, match="r.csv:4: .* contradicts r.csv:3"):
        check_consistent(rows)
