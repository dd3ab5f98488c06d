"""The scoring layer: from (candidate, question, answers, NLI label) to question and response scores.

Shared by the live pipeline and by replay of recorded outputs, so both score identically.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from q2_plugins.metric.components import Answer, AnswerKind, NLILabel
from q2_plugins.metric.normalize import token_f1
from q2_plugins.metric.results import QuestionResult, ResponseResult, ResponseStatus

__all__ = ["NLI_SCORES", "answer_f1", "needs_nli", "question_score", "mean_score", "nli_premise_hypothesis",
           "counted_questions", "response_result"]

# End-to-end fallback and answer-comparison values of a label (paper, Section 3).
NLI_SCORES = {NLILabel.ENTAILMENT: 1.0, NLILabel.NEUTRAL: 0.5, NLILabel.CONTRADICTION: 0.0}


def answer_f1(candidate: str, knowledge_answer: Answer, normalization: str = "q2-original") -> float:
    """Token F1 of the candidate against the knowledge answer; no answer in the knowledge scores 0."""
    if knowledge_answer.kind is AnswerKind.NO_ANSWER:
        return 0.0
    return token_f1(candidate, knowledge_answer.text or "", normalization)


def needs_nli(knowledge_answer: Answer, f1: float) -> bool:
    """NLI decides only where the knowledge gave an ordinary, non-empty span that is not a full token match."""
    return knowledge_answer.kind is AnswerKind.SPAN and bool(knowledge_answer.text) and 0.0 <= f1 < 1.0


def nli_premise_hypothesis(question: str, candidate: str, knowledge_answer: Answer) -> tuple[str, str]:
    """The original's NLI inputs: premise "question knowledge-answer.", hypothesis "question candidate."."""
    return f"{question} {knowledge_answer.text}.", f"{question} {candidate}."


def question_score(f1: float, nli_label: Optional[NLILabel]) -> float:
    """Entailment -> 1, contradiction -> 0, neutral or no NLI -> F1."""
    if nli_label is NLILabel.ENTAILMENT:
        return 1.0
    if nli_label is NLILabel.CONTRADICTION:
        return 0.0
    return f1


def mean_score(values: Sequence[float]) -> float:
    """Mean as the original computed it (numpy's pairwise sum), so recorded means reproduce bit for bit."""
    if not values:
        raise ValueError("mean of no values")
    return float(np.mean(np.asarray(values, dtype=np.float64)))


def counted_questions(no_answer_in_knowledge: Sequence[bool], discard_unanswerable: bool) -> list[bool]:
    """Which of a response's valid questions count towards its score.

    All of them, unless ``discard_unanswerable`` (the paper's Q²*): then, when at least one question has an answer
    in the knowledge, the questions the knowledge cannot answer are left out. A response whose questions all have
    no answer keeps them all (its score stays 0 from them, never undefined).
    """
    flags = [bool(x) for x in no_answer_in_knowledge]
    if discard_unanswerable and not all(flags):
        return [not x for x in flags]
    return [True] * len(flags)


def response_result(index: int, questions: Sequence[QuestionResult], *, fallback_score: Optional[float] = None,
                    fallback_label: Optional[str] = None, num_candidates: int = 0) -> ResponseResult:
    """Step 7: a response's result from its counted questions, else its fallback score, else no valid question.

    The response's score is the mean of its question scores (``score_no_nli`` of their F1s); a fallback score
    stands for both."""
    res = ResponseResult(index=index, status=ResponseStatus.NO_VALID_QUESTION, num_candidates=num_candidates)
    if questions:
        res.status = ResponseStatus.SCORED
        res.score = mean_score([q.score for q in questions])
        res.score_no_nli = mean_score([q.f1 for q in questions])
        res.num_questions = len(questions)
    elif fallback_score is not None:
        res.status = ResponseStatus.FALLBACK
        res.used_fallback = True
        res.fallback_label = fallback_label
        res.score = res.score_no_nli = fallback_score
    return res
