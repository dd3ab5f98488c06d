"""``q2 compare BASELINE SYSTEM...``: is a system's Q² (and coverage) different from the baseline's, on the same
responses? Paired bootstrap resampling or approximate randomisation (:mod:`q2_plugins.metric.significance`).

A system is a result file of ``q2 score`` (either engine: JSONL, Parquet, CSV) / ``q2 replay``, read by
:func:`q2_plugins.io.rows.read_results` (or any JSONL / CSV with an id and a score). Responses are
paired by id (by row when no file has ids). Q² is the mean over the responses that have a score, as Q² defines the
system score: a response without a valid question counts with its end-to-end NLI fallback score when the fallback is
on, and is left out when it has no score; coverage (the share of responses without an error that have a valid
question) is compared with its own test.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from q2_plugins import __version__
from q2_plugins.io.inputs import InputFormatError, UnknownFormatError
from q2_plugins.io.outputs import same_file
from q2_plugins.io.rows import read_sidecar, scan_results
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.results import ResponseStatus

if TYPE_CHECKING:  # numpy and the tests load when a comparison runs, not when the CLI builds its parser
    from q2_plugins.metric.significance import PairedTest, SystemFigure

__all__ = ["CompareConfig", "CompareOptions", "SystemScores", "Comparison", "load_system", "compare", "compare_files",
           "format_table", "run"]

TESTS = {"bs": "paired bootstrap resampling", "ar": "approximate randomisation"}
ALPHA = 0.05


@dataclass(frozen=True)
class CompareConfig:
    """What ``q2 compare`` does: the test (``"bs"`` / ``"ar"``), its resamples or trials, seed and confidence, and
    which fields of a result row hold the id and the score."""

    test: str = "bs"
    n_samples: Optional[int] = None  # default: 1,000 bootstrap resamples / 10,000 randomisation trials
    seed: int = 12345
    confidence: float = 0.95
    id_field: str = "id"
    score_field: str = "score"

    def paired_test(self) -> PairedTest:
        # (lazy: numpy, which q2 report and the command line do without)
        from q2_plugins.metric.significance import PairedTest

        n = self.n_samples if self.n_samples is not None else (1000 if self.test == "bs" else 10000)
        return PairedTest(self.test, n, self.seed, self.confidence)


@dataclass(frozen=True)
class CompareOptions:
    """What a ``q2 compare`` run does: the result files (the baseline first), the comparison, the systems' names
    (default: the file names) and how the outcome is printed (``"text"`` table or ``"json"``)."""

    files: tuple[str, ...]
    config: CompareConfig = CompareConfig()
    names: Optional[tuple[str, ...]] = None
    output_format: str = "text"


class MissingScoreField(InputFormatError, SettingError):
    """A result file without the field ``score_field`` names."""


@dataclass
class SystemScores:
    """One system's responses: ids (None when the file has none), scores (None for no score), and, when the file
    says, whether each response has a valid question and whether it is free of errors."""

    name: str
    path: str
    ids: Optional[list[str]]
    scores: list[Optional[float]]
    has_question: Optional[list[bool]] = None
    valid: Optional[list[bool]] = None
    n_fallback: int = 0
    signature: Optional[str] = None


def _score_value(value: Any, where: str) -> Optional[float]:
    if value is None or value == "":
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InputFormatError(f"{where}: the score {value!r} is not a number") from None
    return None if math.isnan(x) else x


def _file_signature(path: Path, meta: Optional[dict[str, Any]], found: set[str]) -> Optional[str]:
    """The signature of a result file: its ``.meta.json``'s, else the rows' own ``signature`` (all alike)."""
    sig = (meta or {}).get("signature")
    if sig:
        return str(sig)
    if len(found) > 1:
        raise InputFormatError(f"{path} mixes results of {len(found)} signatures; compare files of one signature")
    return found.pop() if found else None


def load_system(path: str | Path, config: CompareConfig, name: Optional[str] = None) -> SystemScores:
    """Read one system's result file, one row at a time (only each row's id, score and status are kept); an
    unreadable record, a duplicate id or a score that is no number stops with an :class:`InputFormatError` naming
    the file and the row."""
    path = Path(path)
    scores: list[Optional[float]] = []
    ids: list[Optional[str]] = []
    status: list[Any] = []
    signatures: set[str] = set()
    try:
        for i, row in enumerate(scan_results(path, score_field=config.score_field, id_field=config.id_field)):
            if config.score_field not in row:
                raise MissingScoreField("score_field", f"{path} row {i} has no {config.score_field!r} field (its "
                                                       f"fields: {sorted(row)[:20]}); name the field of the scores")
            scores.append(_score_value(row.get(config.score_field), f"{path} row {i}"))
            value = row.get(config.id_field)
            ids.append(None if value is None else str(value))
            status.append(row.get("status"))
            if row.get("signature"):
                signatures.add(str(row["signature"]))
    except UnknownFormatError:  # (compare has no format setting: the file's extension says it)
        raise InputFormatError(f"Cannot tell the format of {path} from its extension; name a .jsonl, .parquet, .csv "
                               f"or .tsv results file") from None
    n = len(scores)
    has_ids = sum(i is not None for i in ids)
    if has_ids and has_ids != n:
        raise InputFormatError(f"{path}: {n - has_ids} of {n} rows have no {config.id_field!r}")
    if has_ids:
        seen: set[Optional[str]] = set()
        dup = next((i for i in ids if i in seen or seen.add(i)), None)  # type: ignore[func-returns-value]
        if dup is not None:
            raise InputFormatError(f"{path}: the id {dup!r} occurs more than once; ids must name one response each")
    known = all(s is not None for s in status)
    meta, _ = read_sidecar(path)
    return SystemScores(
        name=name or path.name.split(".")[0], path=str(path), ids=ids if has_ids else None,  # type: ignore[arg-type]
        scores=scores,
        has_question=[s == ResponseStatus.SCORED for s in status] if known else None,
        valid=[s != ResponseStatus.ERROR for s in status] if known else None,
        n_fallback=sum(s == ResponseStatus.FALLBACK for s in status),
        signature=_file_signature(path, meta, signatures),
    )


def _aligned(systems: Sequence[SystemScores]) -> tuple[list[SystemScores], str]:
    """The systems with their responses in the baseline's order, and how they were paired ("id" or "row")."""
    base = systems[0]
    with_ids = [s.ids is not None for s in systems]
    if any(with_ids) and not all(with_ids):
        raise InputFormatError("some files have ids and some have none: " + ", ".join(
            f"{s.path} ({'ids' if s.ids else 'no ids'})" for s in systems) + "; give every file ids, or none")
    if not all(with_ids):
        for s in systems[1:]:
            if len(s.scores) != len(base.scores):
                raise InputFormatError(f"without ids responses pair by row, but {s.path} has {len(s.scores)} rows "
                                       f"and {base.path} {len(base.scores)}")
        return list(systems), "row"
    out = [base]
    for s in systems[1:]:
        extra, missing = sorted(set(s.ids) - set(base.ids)), sorted(set(base.ids) - set(s.ids))  # type: ignore[arg-type]
        if extra or missing:
            raise InputFormatError(f"{s.path} and {base.path} hold different responses: {len(missing)} ids only in "
                                   f"{base.path} {missing[:3]}, {len(extra)} only in {s.path} {extra[:3]}")
        where = {i: k for k, i in enumerate(s.ids)}  # type: ignore[arg-type]
        order = [where[i] for i in base.ids]  # type: ignore[union-attr]

        def pick(values: Optional[list[Any]], order: list[int] = order) -> Optional[list[Any]]:
            return None if values is None else [values[k] for k in order]

        out.append(SystemScores(s.name, s.path, list(base.ids), pick(s.scores), pick(s.has_question),  # type: ignore
                                pick(s.valid), s.n_fallback, s.signature))
    return out, "id"


def _signature_of(systems: Sequence[SystemScores]) -> Optional[str]:
    known = {s.signature for s in systems if s.signature}
    if len(known) > 1:
        shown = "; ".join(f"{s.path}: {s.signature}" for s in systems if s.signature)
        raise InputFormatError(f"the files were scored with different signatures ({shown}); compare results of one "
                               "signature")
    return known.pop() if known else None


@dataclass
class Comparison:
    """The outcome of :func:`compare`: per figure (``q2``, ``coverage``) one :class:`SystemFigure` per system,
    the baseline first."""

    systems: list[SystemScores]
    test: PairedTest
    paired_by: str
    figures: dict[str, list[SystemFigure]]
    scores_signature: Optional[str]
    config: CompareConfig = field(repr=False, default_factory=CompareConfig)

    @property
    def n(self) -> int:
        return len(self.systems[0].scores)

    @property
    def signature(self) -> str:
        """The comparison's own signature: test, resamples, seed, confidence, pairing and the score field."""
        t = self.test
        return (f"q2-compare:{__version__}|test:{t.kind}|{'resamples' if t.kind == 'bs' else 'trials'}:{t.n_samples}"
                f"|seed:{t.seed}|conf:{t.confidence:g}|pair:{self.paired_by}|score:{self.config.score_field}")

    def largest_differences(self, k: int = 20) -> list[dict[str, Any]]:
        """The ``k`` responses where some system's score is furthest from the baseline's: per response its id (or
        row), every system's score and the largest absolute difference to the baseline."""
        base = self.systems[0].scores
        gaps = []
        for i, b in enumerate(base):
            diffs = [abs(s.scores[i] - b) for s in self.systems[1:] if s.scores[i] is not None and b is not None]
            if diffs:
                gaps.append((max(diffs), i))
        gaps.sort(key=lambda g: (-g[0], g[1]))
        ids = self.systems[0].ids
        return [{"id": ids[i] if ids else i, "scores": [s.scores[i] for s in self.systems], "largest_gap": gap}
                for gap, i in gaps[:k]]

    def to_dict(self) -> dict[str, Any]:
        systems = []
        for j, s in enumerate(self.systems):
            row: dict[str, Any] = {"name": s.name, "file": s.path, "signature": s.signature, "baseline": j == 0,
                                   "n": len(s.scores),
                                   "n_scored": sum(x is not None for x in s.scores), "n_fallback": s.n_fallback}
            for metric, figs in self.figures.items():
                f = figs[j]
                row[metric] = {"value": f.value, "interval": f.interval.to_dict() if f.interval else None,
                               "diff": f.diff, "diff_interval": f.diff_interval.to_dict() if f.diff_interval else None,
                               "p_value": f.p_value, "significant": None if f.p_value is None else f.p_value < ALPHA}
            systems.append(row)
        return {"format": "q2-compare", "signature": self.signature, "scores_signature": self.scores_signature,
                "test": self.test.kind, "n_samples": self.test.n_samples, "seed": self.test.seed,
                "confidence": self.test.confidence, "alpha": ALPHA, "paired_by": self.paired_by, "n": self.n,
                "systems": systems}


def compare(systems: Sequence[SystemScores], config: CompareConfig) -> Comparison:
    """Pair the systems' responses, then run the configured test on Q² and (when every file says which responses
    have a valid question) on coverage."""
    import numpy as np

    # (lazy: numpy, which q2 report and the command line do without)
    from q2_plugins.metric.significance import paired_test

    if len(systems) < 2:
        raise ValueError(f"Expected a baseline and at least one system, but got {len(systems)} file(s)")
    test = config.paired_test()
    signature = _signature_of(systems)
    aligned, paired_by = _aligned(systems)
    scores = np.array([[math.nan if x is None else x for x in s.scores] for s in aligned], dtype=np.float64)
    inputs = {"q2": (np.nan_to_num(scores, nan=0.0), (~np.isnan(scores)).astype(np.float64))}
    if all(s.has_question is not None for s in aligned):
        inputs["coverage"] = (np.array([s.has_question for s in aligned], dtype=np.float64),
                              np.array([s.valid for s in aligned], dtype=np.float64))
    figures = dict(zip(inputs, paired_test(list(inputs.values()), test)))  # one set of resamples for both
    return Comparison(aligned, test, paired_by, figures, signature, config)


def compare_files(paths: Sequence[str | Path], config: CompareConfig, names: Optional[Sequence[str]] = None
                  ) -> Comparison:
    """:func:`compare` of result files, the first the baseline."""
    if names is not None and len(names) != len(paths):
        raise SettingError("names", f"expected one name per file ({len(paths)}), but got {len(names)}")
    return compare([load_system(p, config, names[i] if names else None) for i, p in enumerate(paths)], config)


def _num(x: Optional[float], signed: bool = False) -> str:
    return "n/a" if x is None else (f"{x:+.4f}" if signed else f"{x:.4f}")


def _cell(f: SystemFigure, baseline: bool) -> tuple[str, str, str]:
    """(figure with interval, difference with interval, p-value) of one system as text."""
    value = _num(f.value) + (f" [{_num(f.interval.low)}, {_num(f.interval.high)}]" if f.interval else "")
    if baseline:
        return value, "baseline", ""
    diff = _num(f.diff, True) + (f" [{_num(f.diff_interval.low, True)}, {_num(f.diff_interval.high, True)}]"
                                 if f.diff_interval else "")
    p = "n/a" if f.p_value is None else f"{f.p_value:.4f}" + (" *" if f.p_value < ALPHA else "")
    return value, diff, p


def format_table(c: Comparison) -> str:
    """The comparison as a text table, with what "significant" means and how unscored responses count."""
    t = c.test
    level = f"{100 * t.confidence:g}%"
    what = f"{t.n_samples} resamples" if t.kind == "bs" else f"{t.n_samples} trials"
    lines = [f"{TESTS[t.kind]} ({what}, seed {t.seed}); {c.n} responses paired by {c.paired_by}"
             + (f"; {level} intervals" if t.kind == "bs" else "")]
    width = max(len("system"), *(len(s.name) for s in c.systems))
    for metric, figs in c.figures.items():
        cells = [_cell(f, j == 0) for j, f in enumerate(figs)]
        w = [max(len(h), *(len(x[k]) for x in cells)) for k, h in enumerate((metric, "diff to baseline", "p"))]
        lines += ["", f"{'system':<{width}}  {metric:<{w[0]}}  {'diff to baseline':<{w[1]}}  p"]
        lines += [f"{s.name:<{width}}  {x[0]:<{w[0]}}  {x[1]:<{w[1]}}  {x[2]}".rstrip()
                  for s, x in zip(c.systems, cells)]
    lines += ["", f"* p < {ALPHA}: the system's figure differs from the baseline's by more than resampling the same "
                  "responses explains.", "  \"Significant\" means different, not better, and says nothing of how "
                  "large the difference is."]
    unscored = [f"{s.name} {sum(x is None for x in s.scores)}" for s in c.systems]
    fallback = [f"{s.name} {s.n_fallback}" for s in c.systems]
    lines += ["Q2 is the mean over responses with a score. A response without a valid question counts with its",
              "  end-to-end NLI fallback score (" + ", ".join(fallback) + ")",
              "  and, without a fallback score, is left out (" + ", ".join(unscored) + ")."]
    if "coverage" in c.figures:
        lines.append("coverage (responses with a valid question, errors excluded) is tested on its own.")
    else:
        lines.append("coverage: not compared (some file has no 'status' column saying which responses have a "
                     "valid question).")
    unsigned = [s.name for s in c.systems if not s.signature]
    scored_with = c.scores_signature or "unknown (no signature in the files)"
    if c.scores_signature and unsigned:
        scored_with += f" (not checked for {', '.join(unsigned)}: no signature in the file)"
    lines += ["", f"signature   {c.signature}", f"scores      {scored_with}"]
    return "\n".join(lines)


def run(options: CompareOptions) -> int:
    """``q2 compare``: compare the files, print the table (or JSON); returns the exit code. A file given twice
    (through links or other spellings too) is refused: a system compared with itself says nothing."""

    for i, later in enumerate(options.files):
        for j, earlier in enumerate(options.files[:i]):
            if same_file(earlier, later):
                what = "the baseline" if j == 0 else f"system {j}"
                raise ValueError(f"{later} is {what} ({earlier}) again: a file compared with itself says nothing; "
                                 f"name the other system's results")
    result = compare_files(options.files, options.config, options.names)
    print(json.dumps(result.to_dict(), indent=2) if options.output_format == "json" else format_table(result))
    return 0
