"""Byte-level BPE tokenizer (GPT-2 family) read from GGUF metadata or a tokenizer.json, and
the model's chat template.

Pre-tokenization follows SmolLM2's tokenizer.json (and llama.cpp's "smollm" pre-type): every
digit is its own piece, then GPT-2's ByteLevel regex splits the rest. Each piece's UTF-8
bytes are mapped to printable characters (GPT-2's bytes_to_unicode) and merged by rank.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import regex

from speedplan.errors import SpeedplanInputError

_DIGITS = regex.compile(r"(\p{N})")
_BYTE_LEVEL = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable unicode characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class BPETokenizer:
    """encode(text) -> token ids; decode(ids) -> text; apply_chat_template(messages) -> str."""

    def __init__(self, tokens: list[str], merges: list[str], special: list[int], eos_ids: list[int],
                 bos_id: int | None = None, add_bos: bool = False, chat_template: str | None = None):
        self.tokens = tokens
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(merges)}
        self.special = {tokens[i]: i for i in special}
        self.eos_ids = list(eos_ids)
        self.bos_id, self.add_bos = bos_id, add_bos
        self.chat_template = chat_template
        self._byte_enc = bytes_to_unicode()
        self._byte_dec = {c: b for b, c in self._byte_enc.items()}
        self._special_re = regex.compile("(" + "|".join(regex.escape(s) for s in sorted(self.special, key=len, reverse=True)) + ")") \
            if self.special else None
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    @classmethod
    def from_gguf(cls, reader) -> "BPETokenizer":
        f = reader.fields
        if f.get("tokenizer.ggml.model") is None or f["tokenizer.ggml.model"].contents() != "gpt2":
            raise SpeedplanInputError("GGUF tokenizer is not a byte-level BPE ('gpt2') tokenizer")
        tokens = f["tokenizer.ggml.tokens"].contents()
        types = f["tokenizer.ggml.token_type"].contents()
        eos = int(f["tokenizer.ggml.eos_token_id"].contents())
        bos = int(f["tokenizer.ggml.bos_token_id"].contents()) if "tokenizer.ggml.bos_token_id" in f else None
        add_bos = bool(f["tokenizer.ggml.add_bos_token"].contents()) if "tokenizer.ggml.add_bos_token" in f else False
        template = f["tokenizer.chat_template"].contents() if "tokenizer.chat_template" in f else None
        special = [i for i, t in enumerate(types) if t in (3, 4)]  # CONTROL, USER_DEFINED
        eos_ids = [eos] + [i for i in special if tokens[i] == "<|endoftext|>" and i != eos]
        return cls(tokens, f["tokenizer.ggml.merges"].contents(), special, eos_ids, bos, add_bos, template)

    @classmethod
    def from_hf_folder(cls, folder: str | Path) -> "BPETokenizer":
        folder = Path(folder)
        path = folder / "tokenizer.json"
        if not path.exists():
            raise SpeedplanInputError(f"no tokenizer.json in {folder}")
        tj = json.loads(path.read_text())
        model = tj.get("model", {})
        if model.get("type") != "BPE":
            raise SpeedplanInputError(f"{path}: only byte-level BPE tokenizers are supported")
        vocab = dict(model["vocab"])
        for added in tj.get("added_tokens", []):
            vocab[added["content"]] = added["id"]
        tokens = [""] * (max(vocab.values()) + 1)
        for t, i in vocab.items():
            tokens[i] = t
        merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
        special = [a["id"] for a in tj.get("added_tokens", []) if a.get("special")]
        cfg_path = folder / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        eos_tok = cfg.get("eos_token")
        eos_tok = eos_tok.get("content") if isinstance(eos_tok, dict) else eos_tok
        eos_ids = [vocab[eos_tok]] if eos_tok in vocab else special[:1]
        return cls(tokens, merges, special, eos_ids, None, False, cfg.get("chat_template"))

    # ---- encode / decode -------------------------------------------------------------------
    def _bpe(self, piece: str) -> list[int]:
        if piece in self._cache:
            return self._cache[piece]
        word = [self._byte_enc[b] for b in piece.encode("utf-8")]
        while len(word) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(word, word[1:]))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            first, second = word[i], word[i + 1]
            merged, j = [], 0
            while j < len(word):  # merge every occurrence of this pair, left to right
                if j < len(word) - 1 and word[j] == first and word[j + 1] == second:
                    merged.append(first + second)
                    j += 2
                else:
                    merged.append(word[j])
                    j += 1
            word = merged
        ids = [self.vocab[w] for w in word]
        if len(self._cache) < 100_000:
            self._cache[piece] = ids
        return ids

    def _encode_ordinary(self, text: str) -> list[int]:
        ids: list[int] = []
        for chunk in _DIGITS.split(text):
            if chunk:
                for piece in _BYTE_LEVEL.findall(chunk):
                    ids.extend(self._bpe(piece))
        return ids

    def encode(self, text: str, parse_special: bool = True) -> list[int]:
        """Token ids of `text`; with parse_special, special tokens written in the text
        (e.g. <|im_start|>) become their ids instead of being split into bytes."""
        ids = [self.bos_id] if self.add_bos and self.bos_id is not None else []
        parts = self._special_re.split(text) if (parse_special and self._special_re) else [text]
        for part in parts:
            if part in self.special:
                ids.append(self.special[part])
            elif part:
                ids.extend(self._encode_ordinary(part))
        return ids

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        out = bytearray()
        for i in ids:
            if not 0 <= i < len(self.tokens):
                continue  # ids past the vocabulary (random-weight models of a larger vocab)
            tok = self.tokens[i]
            if tok in self.special:
                if not skip_special:
                    out += tok.encode("utf-8")
                continue
            out += bytes(self._byte_dec.get(c, ord("?")) for c in tok)
        return out.decode("utf-8", errors="replace")

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """Render the model's own chat template (jinja2, which torch already depends on)."""
        if not self.chat_template:
            raise SpeedplanInputError("this tokenizer has no chat template; pass --raw to send the prompt as is")
        import jinja2

        env = jinja2.Environment(trim_blocks=False, lstrip_blocks=False)
        return env.from_string(self.chat_template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                                          bos_token="", eos_token=self.tokens[self.eos_ids[0]])
