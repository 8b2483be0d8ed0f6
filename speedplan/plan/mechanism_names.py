"""What users and the engines call the mechanisms, as speedplan names them (one table for
`speedplan sweep --mechanism`, `--acceptance MECH:...` and calibrate's measurement files).

The engines' own names: vLLM's `SpeculativeConfig.method` (draft_model, eagle, eagle3, ngram,
deepseek_mtp and the other *_mtp methods; vllm/config/speculative.py) and SGLang's
`--speculative-algorithm` (EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM; python/sglang/srt/
server_args.py). No imports: the readers and the planner both use it without loading the
mechanism registry.
"""

from __future__ import annotations

ALIASES = {"draft_model": "draft-model", "draft": "draft-model", "standalone": "draft-model", "eagle-3": "eagle3",
           "eagle_3": "eagle3", "eagle 3": "eagle3", "eagle-1": "eagle", "eagle-2": "eagle", "eagle2": "eagle",
           "nextn": "mtp", "n-gram": "ngram", "eagle-3-tree": "eagle3-tree", "eagle3_tree": "eagle3-tree",
           "eagle_tree": "eagle-tree"}
PLAIN = ("none", "plain", "baseline", "off")  # plain decoding (D = 0): a measurement row's mechanism, never a sweep's


def canonical_name(name: str) -> str:
    """A mechanism's head name as speedplan writes it: stripped, lower case, an alias (`ALIASES`,
    vLLM's *_mtp methods) replaced; plain decoding's names (`PLAIN`) are "none"."""
    head = str(name).strip().lower()
    if head in PLAIN:
        return "none"
    return ALIASES.get(head, "mtp" if head.endswith("_mtp") else head)


def canonical_spec(spec: str) -> str:
    """`spec` ("EAGLE-3", "draft_model:llama-3.2-1b", "eagle-tree:topk=8") with its head name
    canonical (`canonical_name`) and the options after ':' as given."""
    head, colon, options = str(spec).strip().partition(":")
    return canonical_name(head) + colon + options
