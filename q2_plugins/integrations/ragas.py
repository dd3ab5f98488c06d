"""Ragas integration: :class:`Q2`, a Ragas metric for ``SingleTurnSample`` and ``MultiTurnSample``, scored by the
local Q² models (no judge LLM, no embeddings, no API key).

- ``SingleTurnSample``: the ``response`` against its ``retrieved_contexts``, the ``user_input`` as the history.
- ``MultiTurnSample``: each ``AIMessage`` with text against its own retrieved contexts, the messages before it as its
  history; the score is the mean over the scored turns. An AI message's contexts are its ``metadata[context_key]``
  (default ``"retrieved_contexts"``), else the ``ToolMessage`` texts since the last human message (what a retrieval
  tool returned).

``ragas.evaluate`` scores the samples of a batch concurrently, one ``single_turn_ascore`` call each: those calls are
gathered into one batched core call (a :class:`~q2_plugins.integrations.batching.MicroBatcher`; ``RunConfig(
max_workers=...)`` and ``batch_size`` set how many arrive together). A sample without a score (an error, or no valid
question with the fallback off) is NaN, Ragas's own "no value", which its means leave out as Q²'s do; its status is
in :attr:`Q2.last_results`.

Ragas sends usage analytics unless ``RAGAS_DO_NOT_TRACK=true`` is set (docs/integrations.md). Needs
``pip install 'q2-plugins[ragas]'``.
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass, field

try:
    from ragas.dataset_schema import MultiTurnSample, SingleTurnSample
    from ragas.messages import AIMessage, HumanMessage, ToolMessage
    from ragas.metrics.base import MetricOutputType, MetricType, MultiTurnMetric, SingleTurnMetric
    from ragas.run_config import RunConfig
except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"q2_plugins.integrations.ragas needs ragas: pip install 'q2-plugins[ragas]' ({e.name} is missing)"
    ) from e

from q2_plugins.integrations.batching import DEFAULT_MAX_BATCH, DEFAULT_WINDOW
from q2_plugins.integrations.chat import Answer, ChatScorer, ConversationResult, Scored, assistant_answers
from q2_plugins.metric.config import Q2Config

__all__ = ["Q2", "answer_of", "conversation_answers"]


def answer_of(sample: SingleTurnSample) -> Answer:
    """The :class:`~q2_plugins.integrations.chat.Answer` of a single-turn sample (see the module docstring)."""
    if not sample.retrieved_contexts:
        raise ValueError("q2: the sample has no retrieved_contexts to score its response against")
    history = (str(sample.user_input),) if sample.user_input else ()
    return Answer(str(sample.response or ""), list(sample.retrieved_contexts), history)


def conversation_answers(sample: MultiTurnSample, context_key: str = "retrieved_contexts") -> list[Answer]:
    """The AI messages with text of a multi-turn sample as answers (see the module docstring)."""
    messages: list[tuple[str, str, t.Any]] = []
    retrieved: list[str] = []
    for message in sample.user_input:
        if isinstance(message, ToolMessage):
            retrieved.append(message.content)
        elif isinstance(message, AIMessage):
            if message.content.strip():
                own = (message.metadata or {}).get(context_key)
                messages.append(("ai", message.content, own if own else list(retrieved)))
        elif isinstance(message, HumanMessage):
            retrieved = []
            messages.append(("human", message.content, None))
    return assistant_answers(messages)


@dataclass
class Q2(SingleTurnMetric, MultiTurnMetric):
    """Q² as a Ragas metric (see the module docstring). ``config`` (default ``Q2Config()``) with ``options``
    (``Q2Config`` fields) on top; ``max_batch`` / ``window`` shape the batches of concurrent calls; ``scorer``: a
    :class:`~q2_plugins.integrations.chat.ChatScorer` to share instead."""

    name: str = "q2"
    _required_columns: t.Dict[MetricType, t.Set[str]] = field(default_factory=lambda: {
        MetricType.SINGLE_TURN: {"response", "retrieved_contexts", "user_input:optional"},
        MetricType.MULTI_TURN: {"user_input"}})
    output_type: MetricOutputType = MetricOutputType.CONTINUOUS
    config: t.Optional[Q2Config] = None
    options: t.Dict[str, t.Any] = field(default_factory=dict)
    context_key: str = "retrieved_contexts"
    max_batch: int = DEFAULT_MAX_BATCH
    window: float = DEFAULT_WINDOW
    scorer: t.Optional[ChatScorer] = field(default=None, repr=False)
    #: each scored sample's result, by the sample's position in the order scored (status and questions)
    last_results: t.List[t.Union[Scored, ConversationResult]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.scorer is None:  # a bad option fails here, before any sample
            self.scorer = ChatScorer(self.config, slot="ragas", max_batch=self.max_batch, window=self.window,
                                     **self.options)

    @property
    def _chat(self) -> ChatScorer:
        assert self.scorer is not None  # set by __post_init__
        return self.scorer

    def init(self, run_config: RunConfig) -> None:
        """Nothing to set up: the models load on the first batch."""

    def _value(self, result: t.Union[Scored, ConversationResult]) -> float:
        self.last_results.append(result)
        return math.nan if result.score is None else float(result.score)

    async def _single_turn_ascore(self, sample: SingleTurnSample, callbacks: t.Any) -> float:
        (result,) = await self._chat.ascore([answer_of(sample)])
        return self._value(result)

    async def _multi_turn_ascore(self, sample: MultiTurnSample, callbacks: t.Any) -> float:
        return self._value(await self._chat.aconversation(conversation_answers(sample, self.context_key)))
