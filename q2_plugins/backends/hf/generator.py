"""The response generator of the BEGIN recipe's ``generated`` method (``q2 perturb --recipe begin --generator``): a
causal or sequence-to-sequence LM from the Hugging Face hub or a folder, loaded under the one load policy
(:mod:`q2_plugins.backends.loading`)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from q2_plugins.backends.loading import fetch, quiet_loading
from q2_plugins.metric.errors import ModelLoadError, SettingError

__all__ = ["HFResponseGenerator", "GeneratorLoadError"]


class GeneratorLoadError(SettingError, ModelLoadError):
    """The ``generator`` model cannot be loaded."""


class HFResponseGenerator:
    """A Hugging Face causal or sequence-to-sequence LM writing responses from "evidence + previous turn" prompts:
    greedy decoding, or sampling at ``temperature`` (seeded by ``seed``), ``batch_size`` prompts a call (left padding
    for causal models). Loaded on construction."""

    def __init__(self, model: str, *, batch_size: int = 16, max_new_tokens: int = 40, device: str = "cpu",
                 seed: int = 0) -> None:
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

        def load(path: str, local: dict[str, Any]) -> tuple[bool, Any, Any]:
            seq2seq = bool(getattr(AutoConfig.from_pretrained(path, **local), "is_encoder_decoder", False))
            tokenizer = AutoTokenizer.from_pretrained(path, padding_side="right" if seq2seq else "left", **local)
            cls = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
            with quiet_loading():  # (no per-file loading bars)
                return seq2seq, tokenizer, cls.from_pretrained(path, **local).to(device).eval()

        try:  # the one load policy of every model (q2_plugins.backends.loading)
            self.seq2seq, self.tokenizer, self.model = fetch("generator", model, load)
        except ModelLoadError as e:
            why = e.__cause__ if e.__cause__ is not None else e
            raise GeneratorLoadError("generator", f"{model} could not be loaded ({str(why).splitlines()[0]}); name a "
                                                  f"local folder or hub name of a causal or seq2seq LM") from None
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.batch_size, self.max_new_tokens, self.device, self.seed = batch_size, max_new_tokens, device, seed

    def generate(self, prompts: Sequence[tuple[str, str]], temperature: Optional[float] = None) -> list[str]:
        import torch

        texts = [f"knowledge: {evidence} previous turn: {previous} response:" if evidence else
                 f"previous turn: {previous} response:" for previous, evidence in prompts]
        sampling = {"do_sample": True, "temperature": temperature, "top_k": 0} if temperature else {"do_sample": False}
        if temperature:
            torch.manual_seed(self.seed)
        out: list[str] = []
        for start in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(texts[start:start + self.batch_size], return_tensors="pt", padding=True,
                                   truncation=True, max_length=512).to(self.device)
            with torch.no_grad():
                ids = self.model.generate(**batch, **sampling, max_new_tokens=self.max_new_tokens,
                                          pad_token_id=self.tokenizer.pad_token_id)
            if not self.seq2seq:
                ids = ids[:, batch["input_ids"].shape[1]:]
            out += [t.strip() for t in self.tokenizer.batch_decode(ids, skip_special_tokens=True)]
        return out
