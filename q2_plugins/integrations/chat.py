"""What the chat and RAG application front ends share (DeepEval, Ragas, DSPy): an answer with the texts it was
grounded on (:class:`Answer`), a conversation's assistant turns as answers (:func:`assistant_answers`), their Q² in one
core call (:class:`ChatScorer`, with concurrent calls gathered by a
:class:`~q2_plugins.integrations.batching.MicroBatcher` or, from threads, a
:class:`~q2_plugins.integrations.batching.ThreadBatcher`), and a conversation's figure, the mean over its scored
turns (:class:`ConversationResult`).

A response without a score (an error, or no valid question with the fallback off) has no number here either: its
figure is ``None`` and its status says why, never NaN. Nothing here imports a framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import anyio

from q2_plugins.integrations import adapters
from q2_plugins.integrations.adapters import explanation_of
from q2_plugins.integrations.batching import DEFAULT_MAX_BATCH, DEFAULT_WINDOW, MicroBatcher, ThreadBatcher
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.results import ResponseResult
from q2_plugins.scorer import Q2Scorer

__all__ = ["Answer", "Scored", "ConversationResult", "ChatScorer", "chat_scorer", "assistant_answers",
           "DEFAULT_THRESHOLD"]

#: the figure a response needs to pass (the threshold of the paper's accuracy figures)
DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class Answer:
    """One answer to score: its text, what it was grounded on (a text or a list of passages) and the turns before
    it (read with ``coref``), oldest first."""

    response: str
    knowledge: Any
    history: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scored:
    """An answer's Q² result and the signature of the call that scored it."""

    result: ResponseResult
    signature: str

    @property
    def score(self) -> Optional[float]:
        """Q² of the answer; None where it has none (see :attr:`status`)."""
        return self.result.score

    @property
    def status(self) -> str:
        return str(self.result.status)

    def reason(self) -> str:
        """The figure (or why there is none), then each question with the answer's and the knowledge's answers."""
        head = "unscored" if self.score is None else f"Q2 {self.score:.4f}"
        return f"{head}; {explanation_of(self.result)}"


@dataclass(frozen=True)
class ConversationResult:
    """A conversation's assistant turns, each with its result: the figure is the mean over the scored turns."""

    turns: tuple[Scored, ...]

    @property
    def score(self) -> Optional[float]:
        """The mean Q² over the turns with a score; None when no turn has one."""
        kept = [t.score for t in self.turns if t.score is not None]
        return sum(kept) / len(kept) if kept else None

    @property
    def status(self) -> str:
        """``scored`` when a turn has a score, else the first turn's status (``no assistant turn`` for none)."""
        if self.score is not None:
            return "scored"
        return self.turns[0].status if self.turns else "no assistant turn"

    @property
    def signature(self) -> Optional[str]:
        return self.turns[0].signature if self.turns else None

    def reason(self) -> str:
        """One paragraph per assistant turn: its position among the assistant turns and its :meth:`Scored.reason`."""
        if not self.turns:
            return "unscored; the conversation has no assistant turn"
        head = "unscored" if self.score is None else (
            f"Q2 {self.score:.4f}, the mean over {sum(t.score is not None for t in self.turns)} of "
            f"{len(self.turns)} assistant turns")
        return head + "".join(f"\n[turn {i + 1}] {t.reason()}" for i, t in enumerate(self.turns))


def assistant_answers(messages: Sequence[tuple[str, str, Any]], *,
                      assistant_roles: Sequence[str] = ("assistant", "ai")) -> list[Answer]:
    """Each assistant message of a conversation (``(role, text, knowledge)`` in order) as an :class:`Answer`: its
    own knowledge, the earlier messages' texts as its history. An assistant message without knowledge is an error
    naming it (Q² needs what the answer should agree with)."""
    answers, history = [], []
    for i, (role, text, knowledge) in enumerate(messages):
        if role in assistant_roles:
            if knowledge is None or (isinstance(knowledge, (list, tuple)) and not knowledge):
                raise ValueError(f"q2: assistant turn {i} has no retrieval context to score it against; give every "
                                 f"assistant turn its retrieval_context")
            answers.append(Answer(str(text), _knowledge(knowledge), tuple(history)))
        history.append(str(text))
    return answers


def _knowledge(knowledge: Any) -> Any:
    return list(knowledge) if isinstance(knowledge, (list, tuple)) else knowledge


class ChatScorer:
    """Q² of :class:`Answer` objects: :meth:`score` in one core call, :meth:`ascore` gathered with the other
    concurrent calls into one (a :class:`MicroBatcher` of ``max_batch`` / ``window``), :meth:`gathered` the same for
    calls from threads (a :class:`ThreadBatcher`; one batch at a time across both). ``config`` (default
    ``Q2Config()``) with ``options`` (``Q2Config`` fields) on top; a bad option fails here, before any answer. The
    models load once per configuration and process (``slot`` names the front end); ``core``: score with this
    scorer instead (a :class:`Q2Scorer` of one's own, or any object with its ``score`` method)."""

    def __init__(self, config: Optional[Q2Config] = None, *, slot: str = "chat", max_batch: int = DEFAULT_MAX_BATCH,
                 window: float = DEFAULT_WINDOW, core: Optional[Any] = None, **options: Any) -> None:
        self.config: Q2Config = adapters.config_from_options(options, base=config)
        self.slot = slot
        self.core = core
        self.calls = 0  # core calls made
        self.signature: Optional[str] = None  # the signature of the last core call
        self.batcher: MicroBatcher[Answer, Scored] = MicroBatcher(self.score, max_batch=max_batch, window=window)
        self.threads: ThreadBatcher[Answer, Scored] = ThreadBatcher(self.score, max_batch=max_batch, window=window,
                                                                    lock=self.batcher.lock)

    @property
    def scorer(self) -> Q2Scorer:
        """The scorer of the core calls: ``core``, else the process's scorer of :attr:`config`."""
        return self.core if self.core is not None else adapters.shared_scorer(self.config, slot=self.slot)

    def score(self, answers: Sequence[Answer]) -> list[Scored]:
        """Every answer's result, in one core call (the history passed only where an answer has one)."""
        answers = list(answers)
        if not answers:
            return []
        with_history = any(a.history for a in answers)
        res = self.scorer.score(responses=[a.response for a in answers], knowledge=[a.knowledge for a in answers],
                                history=[list(a.history) for a in answers] if with_history else None, explain=True)
        self.calls += 1
        self.signature = str(res.signature)
        return [Scored(r, self.signature) for r in res.responses]

    async def ascore(self, answers: Sequence[Answer]) -> list[Scored]:
        """:meth:`score` for a coroutine: the answers join the batch of the calls that arrive with them."""
        out: list[Optional[Scored]] = [None] * len(answers)

        async def one(i: int, answer: Answer) -> None:
            out[i] = await self.batcher.submit(answer)

        async with anyio.create_task_group() as group:
            for i, answer in enumerate(answers):
                group.start_soon(one, i, answer)
        return [s for s in out if s is not None]

    def gathered(self, answers: Sequence[Answer]) -> list[Scored]:
        """:meth:`score` for a thread: the answers join the batch of the calls from other threads that arrive with
        them."""
        return self.threads.submit(answers)

    def conversation(self, answers: Sequence[Answer]) -> ConversationResult:
        """A conversation's turns scored in one core call."""
        return ConversationResult(tuple(self.score(answers)))

    async def aconversation(self, answers: Sequence[Answer]) -> ConversationResult:
        return ConversationResult(tuple(await self.ascore(answers)))


def chat_scorer(scorer: Optional[ChatScorer], config: Optional[Q2Config], options: dict[str, Any], *,
                slot: str) -> ChatScorer:
    """A front end's scorer: ``scorer`` to share one, else a new :class:`ChatScorer` of ``config`` with ``options``
    (``Q2Config`` fields, ``max_batch``, ``window``); both at once is a ``TypeError``."""
    if scorer is None:
        return ChatScorer(config, slot=slot, **options)
    settings = sorted(options) + (["config"] if config is not None else [])
    if settings:
        raise TypeError(f"q2: give either scorer= or the settings, not both (got {', '.join(settings)} too)")
    return scorer
