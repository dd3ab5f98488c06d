"""Coreference for the paper's pronoun step (appendix A): a response's pronouns are replaced by the most informative
mention of their cluster, found over the dialogue history and the response.

The clusters (character spans) become a :class:`~q2_plugins.metric.components.Resolution` by the backend-neutral
rules of :mod:`q2_plugins.metric.coref_rules`. The default backend, :class:`FCoref`, runs the published F-coref
model (Otmazgin et al., 2022; ``biu-nlp/f-coref``, MIT): a RoBERTa encoder with the start/end mention and antecedent
head of its ``fastcoref`` package. The head's inference is written here over ``transformers``' encoder and reads the
published weights as they are (``fastcoref``'s own model class does not build with transformers 5). See
docs/coreference.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from q2_plugins.backends.loading import fetch
from q2_plugins.metric.components import Resolution
from q2_plugins.metric.coref_rules import WORD, join_dialogue, rewrite
from q2_plugins.metric.errors import ModelLoadError, model_load_error

__all__ = ["FCoref", "FCorefModule", "load_fcoref", "COREF_IMPL"]

#: names the implementation in the signature; bump when a change can change a rewritten response
COREF_IMPL = "fcoref-head-v1"

_HEAD_LAYERS = ("start_mention_mlp", "end_mention_mlp", "start_coref_mlp", "end_coref_mlp")
_BILINEAR = ("mention_s2e_classifier", "antecedent_s2s_classifier", "antecedent_e2e_classifier",
             "antecedent_s2e_classifier", "antecedent_e2s_classifier")


# -- the F-coref model ------------------------------------------------------------------------------------------------
class _Layer(torch.nn.Module):
    """dense -> activation -> layer norm, as the published head's fully connected layers."""

    def __init__(self, config: Any, size: int) -> None:
        super().__init__()
        from transformers.activations import ACT2FN

        self.dense = torch.nn.Linear(config.hidden_size, size)
        self.layer_norm = torch.nn.LayerNorm(size, eps=config.layer_norm_eps)
        self.act = ACT2FN[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer_norm(self.act(self.dense(x)))


class FCorefModule(torch.nn.Module):
    """The F-coref network with the parameter names of the published checkpoint: the encoder under its base-model
    prefix (``roberta``) and the mention / antecedent head. ``config.coref_head`` holds ``ffnn_size``,
    ``max_span_length``, ``top_lambda`` and ``max_segment_len``."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        from transformers import AutoModel

        head = config.coref_head
        self.ffnn_size, self.max_span_length = int(head["ffnn_size"]), int(head["max_span_length"])
        self.top_lambda = float(head["top_lambda"])
        self.max_segment_len = int(head.get("max_segment_len", 512))
        encoder = AutoModel.from_config(config, add_pooling_layer=False)
        self.prefix = encoder.base_model_prefix
        setattr(self, self.prefix, encoder)
        for name in _HEAD_LAYERS:
            setattr(self, name, _Layer(config, self.ffnn_size))
        self.mention_start_classifier = torch.nn.Linear(self.ffnn_size, 1)
        self.mention_end_classifier = torch.nn.Linear(self.ffnn_size, 1)
        for name in _BILINEAR:
            setattr(self, name, torch.nn.Linear(self.ffnn_size, self.ffnn_size))

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return getattr(self, self.prefix)(input_ids=ids, attention_mask=mask).last_hidden_state

    def antecedents(self, seq: torch.Tensor) -> tuple[list[tuple[int, int]], list[int]]:
        """One document's encoder output [length, hidden] -> its top mentions (token start, end) in text order and
        each one's antecedent (an index into them, or -1 for none)."""
        n = seq.shape[0]
        sm, em = self.start_mention_mlp(seq), self.end_mention_mlp(seq)
        logits = (self.mention_s2e_classifier(sm) @ em.T + self.mention_start_classifier(sm)
                  + self.mention_end_classifier(em).T)
        valid = torch.ones(n, n, dtype=torch.bool).triu().tril(self.max_span_length - 1)
        logits = torch.where(valid, logits, torch.full_like(logits, -10000.0)).clamp(-10000.0, 10000.0)
        k = max(1, int(n * self.top_lambda))
        top = torch.sort(torch.topk(logits.reshape(-1), k=min(k, n * n)).indices).values
        starts, ends = top // n, top % n
        sc, ec = self.start_coref_mlp(seq[starts]), self.end_coref_mlp(seq[ends])  # row-wise: only the top spans
        pair = logits[starts, ends]
        scores = (pair[:, None] + pair[None, :] + self.antecedent_s2s_classifier(sc) @ sc.T
                  + self.antecedent_e2e_classifier(ec) @ ec.T + self.antecedent_s2e_classifier(sc) @ ec.T
                  + self.antecedent_e2s_classifier(ec) @ sc.T)
        earlier = torch.ones_like(scores, dtype=torch.bool).tril(-1)
        scores = torch.where(earlier, scores, torch.full_like(scores, -10000.0)).clamp(-10000.0, 10000.0)
        scores = torch.cat([scores, torch.zeros(len(top), 1, dtype=scores.dtype)], dim=1)  # the null antecedent
        best = scores.argmax(dim=1).tolist()
        return list(zip(starts.tolist(), ends.tolist())), [b if b < len(top) else -1 for b in best]


@dataclass
class _Doc:
    """One (history, response) pair as the model reads it."""

    text: str
    ids: list[int]
    word_of: list[Optional[int]]  # token -> word index (None: special token)
    words: list[tuple[int, int]]  # word -> character span in ``text``


class FCoref:
    """The :class:`~q2_plugins.metric.components.Coreference` of the F-coref model. Words are split on ``\\w+`` runs and
    punctuation; a dialogue longer than the model's window keeps the end of its history (the response always fits,
    or the item is unfit)."""

    def __init__(self, tokenizer: Any, model: FCorefModule, *, batch_size: int = 32, sort_by_length: bool = True
                 ) -> None:
        self.tokenizer, self.model = tokenizer, model
        self.batch_size, self.sort_by_length = batch_size, sort_by_length

    def _doc(self, history: str, response: str) -> _Doc:
        text, offset = join_dialogue(history, response)
        words = [(m.start(), m.end()) for m in WORD.finditer(text)]
        enc = self.tokenizer([text[s:e] for s, e in words] or [""], is_split_into_words=True,
                             add_special_tokens=False)
        ids, word_of = list(enc["input_ids"]), list(enc.word_ids())
        room = self.model.max_segment_len - 2
        if len(ids) > room:
            cut = len(ids) - room
            while cut < len(ids) and word_of[cut] == word_of[cut - 1]:  # never split a word
                cut += 1
            first = words[word_of[cut]][0] if cut < len(ids) else len(text)
            if first > offset:
                raise ValueError(f"the response alone is longer than the coreference model's window of "
                                 f"{self.model.max_segment_len} tokens")
            ids, word_of = ids[cut:], word_of[cut:]
        tok = self.tokenizer
        return _Doc(text, [tok.cls_token_id] + ids + [tok.sep_token_id], [None] + word_of + [None], words)

    def unfit(self, pairs: Sequence[tuple[str, str]]) -> list[Optional[str]]:
        """Why each pair cannot be resolved (None: it can)."""
        out: list[Optional[str]] = []
        for history, response in pairs:
            try:
                self._doc(history, response)
                out.append(None)
            except ValueError as e:
                out.append(str(e))
        return out

    def resolve(self, pairs: Sequence[tuple[str, str]]) -> list[Resolution]:
        docs = [self._doc(h, r) for h, r in pairs]
        order = sorted(range(len(docs)), key=lambda i: len(docs[i].ids)) if self.sort_by_length else \
            list(range(len(docs)))
        clusters: dict[int, list[list[tuple[int, int]]]] = {}
        pad = self.tokenizer.pad_token_id
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                part = order[start:start + self.batch_size]
                width = max(len(docs[i].ids) for i in part)
                ids = torch.tensor([docs[i].ids + [pad] * (width - len(docs[i].ids)) for i in part])
                mask = torch.tensor([[1] * len(docs[i].ids) + [0] * (width - len(docs[i].ids)) for i in part])
                hidden = self.model.encode(ids.to(self._device()), mask.to(self._device())).float().cpu()
                for row, i in enumerate(part):
                    clusters[i] = self._clusters(docs[i], hidden[row, :len(docs[i].ids)])
        return [rewrite(h, r, clusters[i]) for i, (h, r) in enumerate(pairs)]

    def _device(self) -> Any:
        return next(self.model.parameters()).device

    def _clusters(self, doc: _Doc, seq: torch.Tensor) -> list[list[tuple[int, int]]]:
        """Character-span clusters: each mention joins its antecedent's cluster."""
        spans, antecedent = self.model.antecedents(seq)
        cluster_of: dict[int, int] = {}
        clusters: list[list[int]] = []
        for i, a in enumerate(antecedent):
            if a < 0:
                continue
            if a not in cluster_of:
                cluster_of[a] = len(clusters)
                clusters.append([a])
            cluster_of[i] = cluster_of[a]
            clusters[cluster_of[a]].append(i)
        out = []
        for members in clusters:
            chars = []
            for m in members:
                s, e = doc.word_of[spans[m][0]], doc.word_of[spans[m][1]]
                if s is not None and e is not None:
                    chars.append((doc.words[s][0], doc.words[e][1]))
            if len(chars) > 1:
                out.append(chars)
        return out


# -- loading ----------------------------------------------------------------------------------------------------------
_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
          "merges.txt", "model.safetensors", "pytorch_model.bin")


def _folder(name: str, revision: Optional[str]) -> Path:
    """The model's files under the one load policy (:func:`q2_plugins.backends.loading.fetch`): a local directory
    as it is, a hub id through the Hugging Face cache."""

    def files(path: str, local: dict[str, Any]) -> Path:
        if os.path.isdir(path):
            return Path(path)
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(path, revision=revision, allow_patterns=list(_FILES), **local))

    return fetch("coref", name, files)


def _state_dict(folder: Path) -> dict[str, torch.Tensor]:
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        return load_file(str(folder / "model.safetensors"))
    if (folder / "pytorch_model.bin").is_file():
        return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"no model.safetensors or pytorch_model.bin in {folder}")


def load_fcoref(name: str, revision: Optional[str] = None, device: str = "cpu") -> tuple[Any, FCorefModule]:
    """Tokenizer and :class:`FCorefModule` of an F-coref checkpoint (hub id or directory); a model that cannot load
    raises :class:`~q2_plugins.metric.errors.ModelLoadError` naming the setting ``coref_model``."""
    try:
        from transformers import AutoConfig, AutoTokenizer

        folder = _folder(name, revision)
        config = AutoConfig.from_pretrained(folder)
        if not isinstance(getattr(config, "coref_head", None), dict):
            raise ValueError("its config.json has no 'coref_head': not an F-coref checkpoint")
        tokenizer = AutoTokenizer.from_pretrained(folder, add_prefix_space=True)
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError("it has no fast tokenizer (tokenizer.json)")
        model = FCorefModule(config)
        state = {k: v for k, v in _state_dict(folder).items() if not k.endswith("position_ids")}
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if ".pooler." not in k]
        unexpected = [k for k in unexpected if ".pooler." not in k]
        if missing or unexpected:
            raise ValueError(f"its weights do not fit the F-coref layout (missing {missing[:3]}, "
                             f"unexpected {unexpected[:3]})")
    except ModelLoadError:
        raise
    except Exception as e:  # noqa: BLE001 - hub errors, offline misses, bad files: one line naming the setting
        raise model_load_error("coref", name, e) from e
    model.to(device).eval()
    return tokenizer, model
