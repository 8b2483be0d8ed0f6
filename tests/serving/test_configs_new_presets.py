"""The presets added for newer architectures serve their Hugging Face repos."""

import pytest

from speedplan.serving.plan import hf_repo, mtp_layers
from speedplan.specs.model import preset_names


@pytest.mark.parametrize("preset, repo, mtp", [
    ("qwen3-next-80b-a3b", "Qwen/Qwen3-Next-80B-A3B-Instruct", 1),
    ("gpt-oss-120b", "openai/gpt-oss-120b", 0),
    ("deepseek-v3.2", "deepseek-ai/DeepSeek-V3.2", 1),
    ("glm-4.7-flash", "zai-org/GLM-4.7-Flash", 1),
])
def test_new_presets_serve_their_repos(preset, repo, mtp):
    assert hf_repo(preset) == repo and mtp_layers(preset) == mtp


def test_every_preset_names_a_repo():
    assert [p for p in preset_names() if hf_repo(p) == p] == []
