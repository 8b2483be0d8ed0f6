"""DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5): MLA whose queries each attend to the
`topk` cached tokens a lightning indexer picks, not to the whole context.

Per query token and layer the indexer scores every cached token: `heads` small query heads of
`head_dim` against one key of `head_dim` per token (cached in fp8 with a 4-byte scale), then
keeps the `topk` best. The attention then reads those `topk` latents, a different set for each
query. Below `topk` cached tokens every query reads them all, as dense MLA. GLM-5 computes
the indexer on some layers only ("full" in `indexer_types`) and reuses their picks on the
others ("shared"); those layers hold no indexer weights and no index keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from speedplan.errors import SpeedplanInputError

INDEX_SCALE_BYTES = 4  # one fp32 scale per cached index key (vLLM's and SGLang's fp8 index cache)


@dataclass(frozen=True)
class SparseIndexSpec:
    """The lightning indexer: keys kept per query (`topk`), its query heads and their width,
    and how many layers compute it (the others reuse a computing layer's picks)."""

    topk: int
    heads: int
    head_dim: int
    indexer_layers: int

    def layer_params(self, hidden: int, q_lora_rank: int) -> int:
        """One computing layer's indexer: its query up-projection from the Q latent (from the
        hidden state without one), key projection and LayerNorm, per-head weights."""
        q_in = q_lora_rank or hidden
        return q_in * self.heads * self.head_dim + hidden * self.head_dim + 2 * self.head_dim + hidden * self.heads

    @property
    def key_bytes(self) -> int:
        """Bytes of one cached index key (fp8 values and their scale)."""
        return self.head_dim + INDEX_SCALE_BYTES


def sparse_index(cfg: dict, layers: int, where: str) -> SparseIndexSpec | None:
    """The indexer an MLA config states (`index_topk`, `index_n_heads`, `index_head_dim`;
    computing layers from `indexer_types`, else every layer), or None."""
    if cfg.get("index_topk") is None:
        return None
    values = {}
    for key in ("index_topk", "index_n_heads", "index_head_dim"):
        value = cfg.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 10_000_000:
            raise SpeedplanInputError(f"{where}: sparse attention needs '{key}' as a positive integer, got {value!r}")
        values[key] = value
    types = cfg.get("indexer_types")
    if types is not None and not isinstance(types, list):
        raise SpeedplanInputError(f"{where}: 'indexer_types' must be a list")
    computing = sum(1 for t in types if t == "full") if types else layers
    return SparseIndexSpec(values["index_topk"], values["index_n_heads"], values["index_head_dim"],
                           min(max(computing, 1), layers))
