"""The figure captions cut each acceptance source to its kind and what it came from; a file's
source ('SGLang log: PATH (12 decode lines, ...') was cut inside its parenthesis, leaving it open."""

from __future__ import annotations

import pytest

from speedplan.report.summary import short_acceptance


@pytest.mark.parametrize("source, caption", [
    ("SGLang log: /tmp/s/server.log (12 decode lines, mean accept len 2.800, D=3 from the log's server_args line; "
     "i.i.d. alpha 0.775)", "SGLang log: /tmp/s/server.log"),
    ("vLLM metrics: m.txt (1200 drafts, AL 2.810 at D=3)", "vLLM metrics: m.txt"),
    ("trace: t.jsonl (eagle on smollm2-135m, 400 sequence-steps, D=4)", "trace: t.jsonl"),
    ('published: published_cases.csv: "EAGLE-3 paper Tab.1", LLaMA-3.1-8B-Instruct',
     'published: "EAGLE-3 paper Tab.1"'),
    ("user: al=3.2 at D=4 (i.i.d. alpha 0.700)", "user: al=3.2 at D=4 (i.i.d. alpha 0.700)"),  # whole: closed
])
def test_a_caption_keeps_what_the_source_came_from_and_no_open_parenthesis(source, caption):
    text = short_acceptance(source)
    assert text == caption
    assert text.count("(") == text.count(")")
