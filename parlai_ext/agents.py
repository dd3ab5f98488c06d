"""Q² reranking of beam candidates for ParlAI generator agents.

:class:`Q2RerankMixin` goes in front of any ``TorchGeneratorAgent`` subclass. After the agent's own ``eval_step``
it reranks every example's finished beam hypotheses against the knowledge in the example's message
(``--q2-knowledge-field``), all candidates of the batch in one :func:`q2_plugins.integrations.rerank.rerank_batch` call,
and returns the reranked best as ``text``, the reranked list as ``beam_texts`` (``(text, beam score)`` pairs, best
first) and each candidate's figures as ``q2_rerank``. ``--q2-rerank-weight w`` ranks by
``(1 - w) * Q2 + w * exp(beam score)`` (ParlAI's beam score is the length-penalised log-probability); the default 0
ranks by Q² alone, the beam order breaking ties. Candidates without a Q² score rank last.

Ready-made for the models of the Q² paper, on an existing model file::

    parlai eval_model -m parlai_ext.agents:Q2RerankEndToEndAgent -mf zoo:wizard_of_wikipedia/end2end_generator/model
    parlai eval_model -m parlai_ext.agents:Q2RerankImageSeq2seqAgent -mf zoo:dodecadialogue/wizard_of_wikipedia_ft/model
    parlai eval_model -m parlai_ext.agents:Q2RerankTransformerGeneratorAgent -mf MODEL
"""

from __future__ import annotations

from typing import Any, Optional

from parlai.agents.image_seq2seq.image_seq2seq import ImageSeq2seqAgent
from parlai.agents.transformer.transformer import TransformerGeneratorAgent
from parlai.core.metrics import AverageMetric
from parlai.utils.misc import warn_once
from projects.wizard_of_wikipedia.generator.agents import EndToEndAgent

from parlai_ext.options import NO_KNOWLEDGE, add_q2_args, config_from_opt, knowledge_error, knowledge_field, scorer_for
from q2_plugins.integrations.rerank import rerank_batch

__all__ = ["Q2RerankMixin", "Q2RerankTransformerGeneratorAgent", "Q2RerankImageSeq2seqAgent",
           "Q2RerankEndToEndAgent"]


class Q2RerankMixin:
    """Rerank a ``TorchGeneratorAgent``'s beam candidates by Q² against the example's knowledge."""

    @classmethod
    def add_cmdline_args(cls, parser: Any, partial_opt: Optional[Any] = None) -> Any:
        super().add_cmdline_args(parser, partial_opt=partial_opt)  # type: ignore[misc]
        add_q2_args(parser)
        group = parser.add_argument_group("Q2 reranking of beam candidates (q2-plugins)")
        group.add_argument(
            "--q2-rerank-weight", type=float, default=0.0,
            help="rank beam candidates by (1 - w) * Q2 + w * exp(beam score); 0 = by Q2 alone (ties: beam order)",
        )
        return parser

    def __init__(self, opt: Any, shared: Optional[dict[str, Any]] = None) -> None:
        super().__init__(opt, shared)  # type: ignore[call-arg]
        weight = opt.get("q2_rerank_weight", 0.0)
        if not 0.0 <= weight <= 1.0:
            raise ValueError(f"--q2-rerank-weight must be in [0, 1], got {weight!r}")
        self.q2_rerank_weight = float(weight)
        self.q2_knowledge_field = knowledge_field(opt)
        self.q2_use_history = bool(opt.get("q2_history", False))
        self._q2_config = config_from_opt(opt)
        self._q2_scorer = shared.get("q2_scorer") if shared else None
        if opt.get("beam_size", 1) < 2:
            warn_once("Q2 reranking needs several candidates per example: use --inference beam --beam-size N (N > 1)")

    def share(self) -> dict[str, Any]:
        shared = super().share()  # type: ignore[misc]
        shared["q2_scorer"] = self._q2_scorer
        return shared

    @property
    def q2_scorer(self) -> Any:
        if self._q2_scorer is None:
            self._q2_scorer = scorer_for(self._q2_config)
        return self._q2_scorer

    def batchify(self, obs_batch: Any, *args: Any, **kwargs: Any) -> Any:
        batch = super().batchify(obs_batch, *args, **kwargs)  # type: ignore[misc]
        # the messages of the batch rows (ParlAI keeps them in the batch only with --debug)
        rows = [] if batch.valid_indices is None else [int(i) for i in batch.valid_indices]
        batch["q2_messages"] = [obs_batch[i] for i in rows]
        return batch

    def eval_step(self, batch: Any) -> Any:
        output = super().eval_step(batch)  # type: ignore[misc]
        beams = None if output is None else output.get("beam_texts")
        if not beams:
            return output
        rows, knowledge, history = [], [], []
        for i, obs in enumerate(batch.get("q2_messages") or []):
            if not beams[i]:
                continue
            if self.q2_knowledge_field not in obs:
                warn_once(knowledge_error(obs, self.q2_knowledge_field, "Q2 reranking") + " Kept the beam order.")
                continue
            if obs[self.q2_knowledge_field] == NO_KNOWLEDGE:
                continue
            rows.append(i)
            knowledge.append(obs[self.q2_knowledge_field])
            history.append(obs.get("full_text") or obs.get("text"))
        changed: list[Optional[AverageMetric]] = [None] * len(beams)
        details: list[Optional[list[dict[str, Any]]]] = [None] * len(beams)
        if rows:
            ranked = rerank_batch(
                [[text for text, _ in beams[i]] for i in rows], knowledge,
                history=history if self.q2_use_history else None,
                sequence_scores=[[score for _, score in beams[i]] for i in rows],
                weight=self.q2_rerank_weight, scorer=self.q2_scorer,
                early_stop=False,  # (q2_rerank reports every candidate's score)
            )
            for i, r in zip(rows, ranked):
                beams[i] = [beams[i][j] for j in r.order]
                output["text"][i] = r.best_text
                changed[i] = AverageMetric(int(r.best != 0))
                details[i] = [{"text": r.candidates[j], "beam_score": r.sequence_scores[j], "q2": r.q2[j],
                               "rank_key": r.keys[j]} for j in r.order]
        output["beam_texts"] = beams
        output["q2_rerank"] = details
        self.record_local_metric("q2_rerank_changed", changed)  # type: ignore[attr-defined]
        return output


class Q2RerankTransformerGeneratorAgent(Q2RerankMixin, TransformerGeneratorAgent):
    """``transformer/generator`` with Q² reranking of its beam."""


class Q2RerankImageSeq2seqAgent(Q2RerankMixin, ImageSeq2seqAgent):
    """``image_seq2seq`` (the dodecaDialogue models) with Q² reranking of its beam."""


class Q2RerankEndToEndAgent(Q2RerankMixin, EndToEndAgent):
    """The Wizard of Wikipedia end-to-end generator (the paper's MemNet) with Q² reranking of its beam."""
