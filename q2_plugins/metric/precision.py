"""What a faster setting costs in decisions: the same rows scored in float32 and in the chosen precision or backend,
compared by what Q² decides.

Exact equality of tokens or logits cannot hold between float32 and bfloat16, TF32, float16 or int8 (other kernels,
another summation order), so a reduced precision is judged by its decisions instead: each question's filter outcome
(valid, or dropped and why), each NLI label (answer comparison and fallback), and each response's score.
:func:`compare` measures the agreement of two runs over the same rows; :class:`Agreement` holds it, says when it is
below :data:`TOLERANCE`, and is what ``q2 check-precision`` prints and a run's ``.meta.json`` records
(``precision_check``).

A run on a setting the test suite cannot run (:func:`check_due`: a GPU, float16, bfloat16 off the CPU, TF32, an
int8 backend) checks itself on its first rows: :class:`~q2_plugins.scorer.Q2Scorer` scores the first
``precision_check`` rows again with :func:`reference_config` (float32, the library's code paths) and keeps the
agreement; below the tolerance it warns with the figures. The run itself always goes on with its own setting: a
check never switches it to a slower path.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Sequence

from q2_plugins.metric.config import DEFAULT_BACKEND, Q2Config, split_model

__all__ = ["TOLERANCE", "MOVED", "Tolerance", "Agreement", "compare", "check_due", "reference_config",
           "reference_model", "precision_line", "warn_if_below"]

#: a response's score "moves" when it changes by more than this
MOVED = 0.05


@dataclass(frozen=True)
class Tolerance:
    """The most a reduced precision may change before a run warns: the share of responses whose score moves by more
    than :data:`MOVED` (or is scored in one run only), and the shares of filter decisions and NLI labels that
    flip."""

    moved: float = 0.10
    filter_flips: float = 0.05
    nli_flips: float = 0.05


TOLERANCE = Tolerance()


@dataclass
class Agreement:
    """The agreement of a checked run with its reference over the same rows (see :func:`compare`).

    ``scores``: responses scored in both; ``moved``: of all compared responses, those whose score moved by more
    than :data:`MOVED` or that only one run scored. ``filter_decisions``: questions both runs generated and tried,
    ``filter_flips``: those whose outcome (valid, or the reason it was dropped) differs; ``questions_one_side``:
    questions only one run generated or tried (its beam search went another way). ``nli_labels`` / ``nli_flips``:
    the same for the NLI labels of shared valid questions and of the fallback. ``answers``: valid questions of both
    runs, ``answers_changed`` / ``f1_changed``: those whose knowledge answer / token F1 differs. ``seconds``: each
    run's time, where measured."""

    rows: int = 0
    scores: int = 0
    score_mae: Optional[float] = None
    score_corr: Optional[float] = None
    moved: int = 0
    filter_decisions: int = 0
    filter_flips: int = 0
    questions_one_side: int = 0
    nli_labels: int = 0
    nli_flips: int = 0
    answers: int = 0
    answers_changed: int = 0
    f1_changed: int = 0
    reference: str = ""
    checked: str = ""
    seconds: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def _share(part: int, whole: int) -> float:
        return part / whole if whole else 0.0

    @property
    def moved_share(self) -> float:
        return self._share(self.moved, self.rows)

    @property
    def filter_flip_share(self) -> float:
        return self._share(self.filter_flips, self.filter_decisions)

    @property
    def nli_flip_share(self) -> float:
        return self._share(self.nli_flips, self.nli_labels)

    @property
    def answer_change_share(self) -> float:
        return self._share(self.answers_changed, self.answers)

    @property
    def speed_ratio(self) -> Optional[float]:
        """The reference's time over the checked run's (above 1: the checked setting is faster)."""
        ref, chk = self.seconds.get("reference"), self.seconds.get("checked")
        return ref / chk if ref and chk else None

    def below(self, tolerance: Tolerance = TOLERANCE) -> list[str]:
        """What falls below ``tolerance``, one phrase each (empty: within it)."""
        out = []
        if self.moved_share > tolerance.moved:
            out.append(f"{self.moved_share:.1%} of responses moved by more than {MOVED} (tolerance "
                       f"{tolerance.moved:.0%})")
        if self.filter_flip_share > tolerance.filter_flips:
            out.append(f"{self.filter_flip_share:.1%} of filter decisions flipped (tolerance "
                       f"{tolerance.filter_flips:.0%})")
        if self.nli_flip_share > tolerance.nli_flips:
            out.append(f"{self.nli_flip_share:.1%} of NLI labels flipped (tolerance {tolerance.nli_flips:.0%})")
        return out

    def to_dict(self, tolerance: Tolerance = TOLERANCE) -> dict[str, Any]:
        """The figures as one JSON-ready dict (the ``precision_check`` entry of a run's ``.meta.json``)."""
        return {**asdict(self), "moved_share": self.moved_share, "filter_flip_share": self.filter_flip_share,
                "nli_flip_share": self.nli_flip_share, "answer_change_share": self.answer_change_share,
                "speed_ratio": self.speed_ratio, "moved_by": MOVED,
                "tolerance": asdict(tolerance), "within_tolerance": not self.below(tolerance)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Agreement":
        """The agreement :meth:`to_dict` wrote."""
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def lines(self) -> list[str]:
        """The figures as text, one line each."""

        def num(x: Optional[float], fmt: str) -> str:
            return "-" if x is None else format(x, fmt)

        out = [f"reference     {self.reference}", f"checked       {self.checked}", f"rows          {self.rows}"]
        if self.speed_ratio is not None:
            ratio = self.speed_ratio
            than = f"{ratio:.2f}x faster than" if ratio >= 1 else f"{1 / ratio:.2f}x slower than"
            out.append(f"speed         {self.checked} {than} {self.reference} ({self.seconds['checked']:.2f} s vs "
                       f"{self.seconds['reference']:.2f} s)")
        out += [f"scores        {self.scores} compared: MAE {num(self.score_mae, '.4f')}, correlation "
                f"{num(self.score_corr, '.4f')}",
                f"moved >{MOVED}  {self.moved}/{self.rows} responses ({self.moved_share:.1%})",
                f"filter        {self.filter_flips}/{self.filter_decisions} decisions flipped "
                f"({self.filter_flip_share:.1%}); {self.questions_one_side} questions generated or tried by one "
                f"run only",
                f"NLI           {self.nli_flips}/{self.nli_labels} labels flipped ({self.nli_flip_share:.1%})",
                f"answers       {self.answers_changed}/{self.answers} knowledge answers of shared valid questions "
                f"changed ({self.answer_change_share:.1%}); {self.f1_changed} F1 changed"]
        return out


def _outcomes(result: Any) -> dict[tuple[str, str], str]:
    """Each tried question of a response (``(candidate, question)``) and its filter outcome."""
    out = {(d.candidate, d.question): d.reason for d in result.dropped or ()
           if d.reason != "no_answer_in_knowledge"}  # (Q²*: dropped after the filters; valid for them)
    for q in result.questions or ():
        out[(q.candidate, q.question)] = "valid"
    for d in result.dropped or ():
        if d.reason == "no_answer_in_knowledge":
            out[(d.candidate, d.question)] = "valid"
    return out


def _labels(result: Any) -> dict[tuple[str, str], Optional[str]]:
    """The NLI labels a response's scoring used: per valid question that went to NLI, and the fallback's."""
    out: dict[tuple[str, str], Optional[str]] = {(q.candidate, q.question): q.nli_label
                                                 for q in result.questions or () if q.nli_label is not None}
    if result.fallback_label is not None:
        out[("", "<fallback>")] = result.fallback_label
    return out


def _answers(result: Any) -> dict[tuple[str, str], tuple[Optional[str], float]]:
    """Each counted valid question of a response and its knowledge answer and F1."""
    return {(q.candidate, q.question): (q.knowledge_answer, q.f1) for q in result.questions or ()}


def compare(reference: Sequence[Any], checked: Sequence[Any]) -> Agreement:
    """The :class:`Agreement` of two runs' results (:class:`~q2_plugins.metric.results.ResponseResult`, with their
    explanations) over the same rows, in the same order."""
    if len(reference) != len(checked):
        raise ValueError(f"Expected results of the same rows, but got {len(reference)} and {len(checked)}")
    a = Agreement(rows=len(reference))
    pairs = []
    for ref, chk in zip(reference, checked):
        if ref.score is not None and chk.score is not None:
            pairs.append((ref.score, chk.score))
            a.moved += abs(ref.score - chk.score) > MOVED
        elif (ref.score is None) != (chk.score is None):
            a.moved += 1
        ro, co = _outcomes(ref), _outcomes(chk)
        shared = ro.keys() & co.keys()
        a.filter_decisions += len(shared)
        a.filter_flips += sum(ro[k] != co[k] for k in shared)
        a.questions_one_side += len(ro.keys() ^ co.keys())
        rl, cl = _labels(ref), _labels(chk)
        both = rl.keys() & cl.keys()
        a.nli_labels += len(both)
        a.nli_flips += sum(rl[k] != cl[k] for k in both)
        if ("", "<fallback>") in rl.keys() ^ cl.keys():  # a fallback in one run only: its decision flipped
            a.nli_labels += 1
            a.nli_flips += 1
        ra, ca = _answers(ref), _answers(chk)
        valid = ra.keys() & ca.keys()
        a.answers += len(valid)
        a.answers_changed += sum(ra[k][0] != ca[k][0] for k in valid)
        a.f1_changed += sum(ra[k][1] != ca[k][1] for k in valid)
    a.scores = len(pairs)
    if pairs:
        a.score_mae = sum(abs(x - y) for x, y in pairs) / len(pairs)
        a.score_corr = _pearson([x for x, _ in pairs], [y for _, y in pairs])
    return a


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> Optional[float]:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return 1.0 if sxx == syy == 0 and xs == ys else None  # constant scores: equal, or no correlation defined
    return sxy / math.sqrt(sxx * syy)


def _roles(config: Q2Config) -> tuple[str, ...]:
    return ("qg", "qa", "nli") if config.uses_nli else ("qg", "qa")


def reference_model(model: str) -> Optional[str]:
    """The model string whose float32 transformers model a backend's model string stands for (``ct2:NAME`` or
    ``onnx:NAME`` -> ``NAME``), or None when it is a transformers model already."""

    scheme, name = split_model(model)
    if scheme == DEFAULT_BACKEND:
        return None
    if scheme in ("ct2", "onnx"):  # (the backends' source_model, without importing them)
        return name.partition("#")[0]
    return None


def check_due(config: Q2Config) -> Optional[str]:
    """Why a run of ``config`` should check its decisions against float32 (a setting the test suite cannot run),
    or None: the CPU in float32 or bfloat16 with transformers models is tested exactly."""
    import torch

    reasons = []
    for role in _roles(config):
        device, dtype = torch.device(config.role_device(role)).type, config.role_dtype(role)
        if reference_model(getattr(config, f"{role}_model")) is not None:
            reasons.append(f"{role}: {getattr(config, f'{role}_model').split(':', 1)[0]} backend")
        elif device != "cpu" or dtype not in ("float32", "bfloat16"):
            reasons.append(f"{role}: {dtype} on {device}")
    return "; ".join(reasons) or None


def reference_config(config: Q2Config, *, library_paths: bool = True) -> Q2Config:
    """The float32 reference of ``config``: every role in float32 on transformers models (a backend's model string
    replaced by the model it was made from), no check of its own, no cache; with ``library_paths``, also the
    library's ``generate`` and padded windows (so a fast path's own error shows too)."""
    changes: dict[str, Any] = {"dtype": "float32", "qg_dtype": None, "qa_dtype": None, "nli_dtype": None,
                               "precision_check": 0, "cache_dir": None}
    for role in ("qg", "qa", "nli"):
        source = reference_model(getattr(config, f"{role}_model"))
        if source is not None:
            changes[f"{role}_model"] = source
    if library_paths:
        changes.update(qg_search="library", pack_windows=False)
    return config.replace(**changes)


def describe(config: Q2Config, library_paths: bool = False) -> str:
    """A short account of how a config runs, for the agreement's ``reference`` / ``checked`` lines."""
    parts = []
    for role in _roles(config):
        model = getattr(config, f"{role}_model")
        if reference_model(model) is not None:  # a backend's compute type (int8 unless named after '#')
            scheme, name = split_model(model)
            parts.append(f"{role} {scheme} {name.partition('#')[2] or 'int8'}")
        else:
            parts.append(f"{role} {config.role_dtype(role)}")
    devices = sorted({config.role_device(r) for r in _roles(config)})
    paths = ", library paths" if library_paths else ""
    return f"{', '.join(parts)} on {'/'.join(devices)}{paths}"


def precision_line(checked: dict[str, Any]) -> str:
    """A run's summary line for its ``precision_check`` record (:meth:`Agreement.to_dict`)."""
    return (f"precision     first {checked['rows']} rows vs {checked['reference']}: {checked['moved_share']:.1%} "
            f"moved > {checked['moved_by']}, {checked['filter_flip_share']:.1%} filter and "
            f"{checked['nli_flip_share']:.1%} NLI decisions flipped")


def warn_if_below(agreement: Agreement, tolerance: Tolerance = TOLERANCE) -> bool:
    """Warn (a ``RuntimeWarning`` with the figures) when ``agreement`` is below ``tolerance``; True when it did."""
    below = agreement.below(tolerance)
    if below:
        warnings.warn(f"q2: decisions of {agreement.checked} differ from {agreement.reference} on the first "
                      f"{agreement.rows} rows: {'; '.join(below)} (score MAE {agreement.score_mae or 0:.4f}); the "
                      f"run goes on with its own setting: measure with q2 check-precision before relying on it",
                      RuntimeWarning, stacklevel=3)
    return bool(below)
