"""DeepEval integration: Q² as a DeepEval metric, :class:`Q2Metric` for an ``LLMTestCase`` and
:class:`Q2ConversationalMetric` for a ``ConversationalTestCase``, scored by the local Q² models (no judge LLM, no
API key).

- :class:`Q2Metric`: the test case's ``actual_output`` against its ``retrieval_context`` (else its ``context``), the
  ``input`` as the history.
- :class:`Q2ConversationalMetric`: each assistant turn against its own ``retrieval_context``, the turns before it as
  its history; the score is the mean over the scored turns, and the reason gives each turn's result.

``score`` is Q² in [0, 1], ``success`` whether it reaches ``threshold`` (0.5), and ``reason`` the questions Q² asked
with the answer's and the knowledge's answers. A test case that cannot be scored (an error, or no valid question with
the fallback off) gets ``score = None``, ``success = False`` and its status in ``reason`` (and in :attr:`status`),
never NaN. ``deepeval.evaluate`` runs ``a_measure`` on many test cases at once: those concurrent calls are gathered
into one batched core call (a :class:`~q2_plugins.integrations.batching.MicroBatcher`, as the Inspect scorer does);
``measure`` scores its one test case. The copies DeepEval makes of a metric for each test case share its scorer.

DeepEval sends telemetry unless ``DEEPEVAL_TELEMETRY_OPT_OUT=1`` is set (docs/integrations.md). Needs
``pip install 'q2-plugins[deepeval]'``.
"""

from __future__ import annotations

from typing import Any, Optional, Union

try:
    from deepeval.metrics import BaseConversationalMetric, BaseMetric
    from deepeval.test_case import ConversationalTestCase, LLMTestCase
except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"q2_plugins.integrations.deepeval needs deepeval: pip install 'q2-plugins[deepeval]' ({e.name} is missing)"
    ) from e

from q2_plugins.integrations.chat import (
    DEFAULT_THRESHOLD,
    Answer,
    ChatScorer,
    ConversationResult,
    Scored,
    assistant_answers,
    chat_scorer,
)
from q2_plugins.metric.config import Q2Config

__all__ = ["Q2Metric", "Q2ConversationalMetric", "answer_of", "DEEPEVAL_WINDOW"]

#: seconds a batch of ``a_measure`` calls waits for another call to join: ``deepeval.evaluate`` starts its concurrent
#: calls a few hundredths of a second apart on a busy machine (up to 0.12 s on 2 shared cores)
DEEPEVAL_WINDOW = 0.1


def answer_of(test_case: LLMTestCase) -> Answer:
    """The :class:`~q2_plugins.integrations.chat.Answer` of a single-turn test case (see the module docstring)."""
    knowledge = test_case.retrieval_context or test_case.context
    if not knowledge:
        raise ValueError("q2: the test case has neither retrieval_context nor context to score actual_output against")
    history = (str(test_case.input),) if test_case.input else ()
    return Answer(str(test_case.actual_output or ""), list(knowledge), history)


class _Q2Base:
    """What both metrics share: the figure, the verdict and the reason of one result."""

    scorer: ChatScorer
    threshold: float
    status: Optional[str] = None
    signature: Optional[str] = None

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, *, config: Optional[Q2Config] = None,
                 scorer: Optional[ChatScorer] = None, **options: Any) -> None:
        if not 0 <= threshold <= 1:
            raise ValueError(f"Expected a threshold in [0, 1], but got {threshold}")
        self.threshold = threshold  # DeepEval copies a metric per test case from these attributes
        if scorer is None:
            options.setdefault("window", DEEPEVAL_WINDOW)
        self.scorer = chat_scorer(scorer, config, options, slot="deepeval")
        self.async_mode = True
        self.include_reason = True
        self.evaluation_model = "Q2 (local QG, QA and NLI models)"

    def _take(self, result: Union[Scored, ConversationResult]) -> Optional[float]:
        self.score = result.score  # type: ignore[attr-defined]
        self.status, self.signature = result.status, result.signature
        self.reason = result.reason()  # type: ignore[attr-defined]
        self.error = None  # an unscored case is a result (its status), not a failure of the metric
        self.success = self.score is not None and self.score >= self.threshold  # type: ignore[attr-defined]
        return self.score  # type: ignore[attr-defined]

    def is_successful(self) -> bool:
        return bool(self.success)  # type: ignore[attr-defined]


class Q2Metric(_Q2Base, BaseMetric):
    """Q² of an ``LLMTestCase``'s ``actual_output`` against its retrieval context. ``config`` (default
    ``Q2Config()``) with ``options`` (``Q2Config`` fields) on top; ``max_batch`` / ``window`` shape the batches of
    concurrent ``a_measure`` calls; ``scorer``: share a :class:`~q2_plugins.integrations.chat.ChatScorer` instead."""

    def measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> Optional[float]:
        (result,) = self.scorer.score([answer_of(test_case)])
        return self._take(result)

    async def a_measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> Optional[float]:
        (result,) = await self.scorer.ascore([answer_of(test_case)])
        return self._take(result)

    @property
    def __name__(self) -> str:  # type: ignore[override]
        return "Q2"


class Q2ConversationalMetric(_Q2Base, BaseConversationalMetric):
    """Q² of a ``ConversationalTestCase``: each assistant turn against its own ``retrieval_context``, the mean over
    the scored turns. Settings as for :class:`Q2Metric`."""

    @staticmethod
    def answers(test_case: ConversationalTestCase) -> list[Answer]:
        """The assistant turns of a conversation as answers (their own retrieval context, the turns before)."""
        return assistant_answers([(t.role, t.content, t.retrieval_context) for t in test_case.turns])

    def measure(self, test_case: ConversationalTestCase, *args: Any, **kwargs: Any) -> Optional[float]:
        return self._take(self.scorer.conversation(self.answers(test_case)))

    async def a_measure(self, test_case: ConversationalTestCase, *args: Any, **kwargs: Any) -> Optional[float]:
        return self._take(await self.scorer.aconversation(self.answers(test_case)))

    @property
    def __name__(self) -> str:  # type: ignore[override]
        return "Q2 (conversation)"
