"""Self-contained HTML reports of Q² results: one file with inline CSS and JavaScript that opens from disk offline.

Input rows are the result rows ``q2 score`` (either engine, JSONL / Parquet / CSV) and ``q2 replay`` write, read by
the one reader :func:`q2_plugins.io.rows.read_results` (``row``, the input fields, the result fields; with
``--explain`` the questions); per-example files of the framework adapters are the same rows. A results file may have
a sidecar ``<file>.meta.json`` (``signature``, ``summary``, ``config``, ``version``, ``columns``); without one the
summary is computed from the rows.

The data goes into the page as JSON inside ``<script type="application/json">`` with ``<``, ``>``, ``&``, U+2028 and
U+2029 escaped, and the page's script renders every text through text nodes, so text from the data never becomes
markup. Rows render one page at a time and a response's explanation only when it is opened, so reports of tens of
thousands of responses stay responsive.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Sequence

from q2_plugins.backends.loading import random_weight_models
from q2_plugins.io.columns import TextColumns, recorded_columns
from q2_plugins.io.inputs import InputFormatError, named_errors, read_rows
from q2_plugins.io.outputs import open_new, replace_own
from q2_plugins.io.rows import RANDOM_WEIGHTS_FIELD, kept_name, read_sidecar, result_row, scan_results
from q2_plugins.jobs.compare import CompareConfig, compare_files
from q2_plugins.metric import names as M
from q2_plugins.metric.results import Q2Result, Q2Stats, ResponseResult, ResponseStatus

__all__ = ["ReportInput", "load_results", "MAX_PAGE_ROWS", "attach_texts", "result_rows", "summary_of_rows",
           "render_html", "write_html", "comparison_of_files", "report_from_files"]

_STATUSES = (ResponseStatus.SCORED, ResponseStatus.FALLBACK, ResponseStatus.NO_VALID_QUESTION, ResponseStatus.ERROR)
_PLACEHOLDER = "__Q2_REPORT_DATA__"
#: where the texts are in a scored input file unless named otherwise
_TEXT_COLUMNS = (TextColumns.response_column, TextColumns.knowledge_column)
_HASH_PLACEHOLDER = "__Q2_SCRIPT_HASH__"
_JS_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


@dataclass
class ReportInput:
    """Rows read from one or more results files, with what their sidecars said."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    summary: Optional[dict[str, Any]] = None  # a sidecar's summary, when it covers exactly these rows
    config: Optional[dict[str, Any]] = None
    version: Optional[str] = None
    notes: list[str] = field(default_factory=list)
    shorts: dict[str, str] = field(default_factory=dict)  # a sidecar's full signature -> its short form
    total: int = 0  # the rows the files hold (``rows``: all of them, or a sample of them)
    n_errors: int = 0  # ...with status error, of which
    n_unread: int = 0  # ...rows that are no result rows
    histogram: Optional[dict[str, Any]] = None  # the histogram of every row, when ``rows`` is a sample
    random_weights: list[str] = field(default_factory=list)  # random-weight test models the rows name (no sidecar)


#: the column of an input's human label (consistent / inconsistent), which the page splits its histogram by
HUMAN_LABEL = "human_label"
# the error of a row the reader made of something that is no result row (in an input file given by mistake, all)
_NOT_READ = re.compile(r"^\S+( line \d+| record \d+| responses\[\d+\])?: (.*?)(not a Q² result row|not valid "
                       r"JSON|a JSON \w+, expected an object)")


def _as_result_row(obj: Any, where: str) -> dict[str, Any]:
    """A result row as the report reads it; anything else becomes an error row that says what was found."""
    if not isinstance(obj, dict):
        return {"status": ResponseStatus.ERROR, "error": f"{where}: a JSON {type(obj).__name__}, expected an object"}
    if "__error__" in obj:  # a record the reader could not read: its message names its line
        return {"status": ResponseStatus.ERROR, "error": f"{where.rsplit(' record ', 1)[0]}: {obj['__error__']}"}
    if "status" not in obj:
        return {**{k: v for k, v in obj.items() if isinstance(v, (str, int, float, bool))},
                "status": ResponseStatus.ERROR,
                "error": f"{where}: not a Q² result row (no 'status' field; fields {sorted(obj)[:12]})"}
    row = dict(obj)
    if row.get("status") not in _STATUSES:
        row["error"] = f"{where}: unknown status {row.get('status')!r}" + (f"; {row['error']}" if row.get("error")
                                                                            else "")
        row["status"] = ResponseStatus.ERROR
    elif row["status"] in (ResponseStatus.SCORED, ResponseStatus.FALLBACK) and not _finite(row.get("score")):
        row["error"] = f"{where}: status {row['status']!r} without a numeric score (score={row.get('score')!r})"
        row["status"] = ResponseStatus.ERROR
    return row


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _with_texts(row: dict[str, Any], columns: dict[str, Optional[str]]) -> dict[str, Any]:
    """A result row with ``response`` / ``knowledge`` / ``history`` taken from the input fields that held them (the
    sidecar's ``columns``: a run with ``--response-column text`` keeps the response in ``text``)."""

    for what, column in columns.items():
        value = row.get(kept_name(column)) if isinstance(column, str) else None
        if what not in row and isinstance(value, str):
            row[what] = value
    return row


#: ``q2 report`` puts at most this many rows in the page (a stated random sample; ``--all-rows``: every row); the
#: summary and the histogram always count every row
MAX_PAGE_ROWS = 10_000


def load_results(paths: Sequence[str | Path], max_rows: Optional[int] = None, seed: int = 0) -> ReportInput:
    """Read results files with their ``.meta.json`` sidecars through :func:`q2_plugins.io.rows.scan_results` (either
    engine's output, JSONL / Parquet / CSV, a JSON ``Q2Result.to_dict()``, per-example files of the adapters), one
    row at a time.

    With ``max_rows``, at most that many rows are kept (a uniform random sample drawn with ``seed``, in file order;
    :attr:`ReportInput.total` says how many there are), while the summary and the histogram count every row, so
    memory stays bounded whatever the files hold. A result row the page cannot show (a status it does not know, a
    score that is no number) becomes an error row naming the file and record, so nothing is dropped. Ids may
    repeat (a note counts them): the page keys rows by their place.
    """
    import random

    out = ReportInput()
    metas = []
    rng = random.Random(seed)
    tally = _Tally()
    ids: set[str] = set()
    repeated = 0
    for p in paths:
        path = Path(p)
        out.sources.append(str(path))
        meta, notes = read_sidecar(path)
        columns = _columns(meta)
        n = 0
        for n, r in enumerate(scan_results(path, id_field=None), start=1):  # (ids may repeat: see below)
            ident = r.get("id")
            if isinstance(ident, (str, int)) and not isinstance(ident, bool):
                repeated += str(ident) in ids
                ids.add(str(ident))
            row = _with_texts(_as_result_row(r, f"{path.name} record {n}"), columns)
            sig = row.pop("signature", None)  # per-example files of the adapters may carry it on each row
            _add_names(out.random_weights, row.pop(RANDOM_WEIGHTS_FIELD, None))  # ...and its random-weight models
            if isinstance(sig, str) and sig not in out.signatures:
                out.signatures.append(sig)
            tally.add(row)
            if max_rows is None or len(out.rows) < max_rows:
                out.rows.append(row)
            else:  # reservoir sampling: every row kept with the same chance
                k = rng.randrange(tally.n)
                if k < max_rows:
                    out.rows[k] = row
        out.notes.extend(notes)
        metas.append((path, meta, n))
    out.total, out.n_errors, out.n_unread = tally.n, tally.n_errors, tally.n_unread
    if repeated:  # (subsets scored into one file, or files of several runs: each row is its own response here)
        out.notes.append(f"{repeated:,} rows have an id an earlier row has: each row is shown as a response of its "
                         f"own, by its place in the files")
    if max_rows is not None and tally.n > max_rows:
        out.rows.sort(key=lambda r: r["_q2_pos"])
        out.histogram = tally.histogram()
        out.notes.append(f"the table shows a random sample of {len(out.rows):,} of the {tally.n:,} responses; the "
                         f"summary and the histogram count all of them (q2 report --all-rows: every row)")
    for r in out.rows:
        r.pop("_q2_pos", None)
    for _, meta, _ in metas:
        if meta is None:
            continue
        sig = meta.get("signature")
        if isinstance(sig, str) and sig not in out.signatures:
            out.signatures.append(sig)
        if isinstance(sig, str) and isinstance(meta.get("signature_short"), str):
            out.shorts[sig] = meta["signature_short"]
        if out.config is None and isinstance(meta.get("config"), dict):
            out.config = meta["config"]
        _add_names(out.random_weights, meta.get(RANDOM_WEIGHTS_FIELD))  # (named where the models' paths resolved)
        if out.version is None and meta.get("version") is not None:
            out.version = str(meta["version"])
    if len(metas) == 1 and metas[0][1] is not None and isinstance(metas[0][1].get("summary"), dict):
        path, meta, n = metas[0]
        if meta["summary"].get("n") == n:
            # (the intervals from the rows: a sidecar written before the bounded interval may hold another)
            out.summary = {**meta["summary"], **(tally.stats.intervals() if meta["summary"].get("q2") is not None
                                                 else {})}
        else:
            out.notes.append(f"{path.name}.meta.json summarises {meta['summary'].get('n')} responses but the file "
                             f"holds {n}; the summary is computed from the rows")
    if out.summary is None and out.histogram is not None:
        out.summary = tally.stats.summary()
    return out


def _columns(meta: Optional[dict[str, Any]]) -> dict[str, Optional[str]]:
    saved = (meta or {}).get("columns")
    return dict(saved) if isinstance(saved, dict) else recorded_columns()


def _human_class(r: dict[str, Any]) -> Optional[str]:
    for key in ("gold", HUMAN_LABEL):
        if r.get(key) in ("consistent", "inconsistent"):
            return r[key]
    return None


class _Tally:
    """What the page needs of every row, added up one row at a time: the figures, the counts and the histogram
    (ten bins of 0.1 by human label, or else by predicted BEGIN label, as the page's own histogram bins them)."""

    BINS = 10

    def __init__(self) -> None:
        self.n = self.n_errors = self.n_unread = 0
        self.stats = Q2Stats()
        self.by_human = [{"consistent": 0, "inconsistent": 0, "none": 0} for _ in range(self.BINS)]
        self.by_class = [{"consistent": 0, "inconsistent": 0, "none": 0} for _ in range(self.BINS)]
        self.human = self.begin = False

    def add(self, row: dict[str, Any]) -> None:
        row["_q2_pos"] = self.n
        self.n += 1
        status = row["status"]
        self.n_errors += status == ResponseStatus.ERROR
        self.n_unread += status == ResponseStatus.ERROR and bool(_NOT_READ.match(str(row.get("error"))))
        score = row.get("score")
        no_nli = row.get("score_no_nli")
        self.stats = self.stats + Q2Stats.of([ResponseResult(index=0, status=status, score=score, score_no_nli=(
            no_nli if _finite(no_nli) else score))])
        human = _human_class(row)
        label = row.get("label")
        self.human = self.human or human is not None
        self.begin = self.begin or isinstance(label, str)
        if not _finite(score):
            return
        i = min(self.BINS - 1, max(0, math.floor(score * self.BINS)))
        cls = human or (("consistent" if label == "entailment" else "inconsistent") if isinstance(label, str)
                        else None)
        self.by_human[i][human or "none"] += 1
        self.by_class[i][cls or "none"] += 1

    def histogram(self) -> dict[str, Any]:
        source = "gold" if self.human else "begin" if self.begin else None
        bins = self.by_human if source == "gold" else self.by_class
        return {"bins": bins, "n": sum(sum(b.values()) for b in bins), "class_source": source}


def attach_texts(data: ReportInput, inputs: str | Path, columns: Sequence[Optional[str]] = _TEXT_COLUMNS,
                 fmt: Optional[str] = None) -> int:
    """Add the scored texts to result rows that lack them, from the input file ``q2 score`` read: the row whose
    ``row`` field is n gets the input's n-th row (the same numbering as ``q2 score``). ``columns`` are the response,
    knowledge and (optional) history columns. Returns how many rows got texts."""

    response_col, knowledge_col, *rest = columns
    history_col = rest[0] if rest else None
    wanted: dict[int, list[dict[str, Any]]] = {}
    for r in data.rows:
        n = r.get("row")
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            wanted.setdefault(n, []).append(r)
    done, n_inputs = 0, 0
    for n_inputs, src in enumerate(read_rows(inputs, fmt), start=1):  # one input row at a time
        for r in wanted.pop(n_inputs - 1, ()):
            texts = {"response": src.get(response_col), "knowledge": src.get(knowledge_col),
                     "history": src.get(history_col) if history_col else None, HUMAN_LABEL: src.get(HUMAN_LABEL)}
            added = {k: v for k, v in texts.items() if isinstance(v, str) and k not in r}
            r.update(added)
            done += bool(added)
    left = {id(r) for rows in wanted.values() for r in rows}
    missed = sum(not ("response" in r and "knowledge" in r) for r in data.rows  # (both engines' rows carry texts)
                 if not isinstance(r.get("row"), int) or isinstance(r.get("row"), bool) or id(r) in left)
    if missed:
        data.notes.append(f"{missed} of {len(data.rows)} rows got no text from {inputs} (no 'row' number within "
                          f"its {n_inputs} rows)")
    return done


def result_rows(result: Q2Result, responses: Optional[Sequence[str]] = None,
                knowledge: Optional[Sequence[str]] = None, ids: Optional[Sequence[Any]] = None) -> list[dict[str, Any]]:
    """Report rows of a ``Q2Result`` (score with ``explain=True`` to see questions), with the texts it scored."""
    n = len(result.responses)
    for name, seq in (("responses", responses), ("knowledge", knowledge), ("ids", ids)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"result_rows: {name} has {len(seq)} items but the result has {n} responses")

    explain = any(r.explained for r in result.responses)
    rows = []
    for i, res in enumerate(result.responses):
        fields = {**({"id": ids[i]} if ids is not None else {}),
                  **({"response": responses[i]} if responses is not None else {}),
                  **({"knowledge": knowledge[i]} if knowledge is not None else {})}
        rows.append(result_row(i, fields, res, explain, random_weights=result.random_weights))
    return rows


def summary_of_rows(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """System figures of result rows, as ``Q2Stats.summary()`` gives them."""
    return Q2Stats.of(
        ResponseResult(index=i, status=r["status"], score=r.get("score"),
                       score_no_nli=r.get("score_no_nli") if _finite(r.get("score_no_nli")) else r.get("score"))
        for i, r in enumerate(rows)
    ).summary()


def _clean(x: Any) -> Any:
    """JSON-safe copy: non-finite floats become None (JSON has no NaN)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def _add_names(into: list[str], value: Any) -> None:
    """Add to ``into`` the model settings a ``random_weights`` field names that it lacks (nothing when the field is
    absent or not a list of text)."""
    for name in value if isinstance(value, list) else []:
        if isinstance(name, str) and name not in into:
            into.append(name)


def _script_json(payload: dict[str, Any]) -> str:
    try:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(_clean(payload), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for ch, esc in _JS_ESCAPES.items():
        text = text.replace(ch, esc)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (text read back from \ud800 escapes) stays such an escape
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def render_html(
    rows: Sequence[dict[str, Any]],
    *,
    signatures: Sequence[str] = (),
    summary: Optional[dict[str, Any]] = None,
    title: str = "Q² report",
    sources: Sequence[str] = (),
    config: Optional[dict[str, Any]] = None,
    version: Optional[str] = None,
    notes: Sequence[str] = (),
    random_weights: Sequence[str] = (),
    page_size: int = 50,
    comparison: Optional[dict[str, Any]] = None,
    shorts: Optional[dict[str, str]] = None,
    histogram: Optional[dict[str, Any]] = None,
) -> str:
    """The report page for ``rows`` (result dicts). ``summary`` defaults to one computed from the rows;
    ``comparison`` (:func:`comparison_of_files`) adds the paired test of several systems. The page shows each
    signature's short form (a :class:`~q2_plugins.metric.signature.Signature`'s, or ``shorts[full]``) with the full one
    on demand. ``histogram`` (:attr:`ReportInput.histogram`): the bins of every row, when ``rows`` is a sample. The page
    says its scores mean nothing when the models were random-weight test models: named by ``config`` (a sidecar's),
    ``random_weights`` or the rows' own ``random_weights`` field (the front ends that write no sidecar)."""
    shorts = shorts or {}
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size}")
    checked = [_as_result_row(r, f"row {i}") for i, r in enumerate(rows)]
    random = random_weight_models(config)
    _add_names(random, list(random_weights))
    for r in checked:
        _add_names(random, r.pop(RANDOM_WEIGHTS_FIELD, None))
    if random:
        notes = [f"random-weight test models ({', '.join(random)}: q2 make-test-models): every score and label on "
                 f"this page is meaningless; score with real models for real figures", *notes]
    payload = {
        "title": title, "sources": list(sources), "signatures": list(signatures),
        "signatures_short": [getattr(sig, "short", None) or shorts.get(sig) for sig in signatures],
        "summary": summary if summary is not None else summary_of_rows(checked),
        "config": config, "version": version, "notes": list(notes), "page_size": page_size, "comparison": comparison,
        "interval_method": M.MEAN_INTERVAL_METHOD,
        "histogram": histogram,
        "rows": [{k: v for k, v in r.items() if v is not None} for r in checked],
    }
    head, sep, tail = _template().partition(_PLACEHOLDER)
    if not sep:
        raise RuntimeError("report template has no data placeholder")
    return head + _script_json(payload) + tail


def _template() -> str:
    """The page template, its Content-Security-Policy allowing exactly its own script (by hash): no other script,
    and no inline event handler, can run even if markup ever reached the page."""
    template = resources.files(__name__).joinpath("template.html").read_text(encoding="utf-8")
    scripts = re.findall(r"<script>(.*?)</script>", template, flags=re.S)
    if len(scripts) != 1:
        raise RuntimeError(f"report template: expected one inline script, found {len(scripts)}")
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode("ascii")
    return template.replace(_HASH_PLACEHOLDER, f"sha256-{digest}", 1)


def write_html(path: str | Path, rows: Sequence[dict[str, Any]], **kwargs: Any) -> Path:
    """Write the report of ``rows`` to ``path`` (atomically: a temporary file renamed into place)."""
    path = Path(path)
    html = render_html(rows, **kwargs)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")

    fd = open_new(tmp, setting="html")  # (a link or another user's file there is refused, never written through)
    try:
        with named_errors(path), os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(html)
        replace_own(tmp, path)
    finally:
        if os.path.lexists(tmp) and not os.path.islink(tmp):
            tmp.unlink()
    return path


def comparison_of_files(paths: Sequence[str | Path], notes: Optional[list[str]] = None) -> Optional[dict[str, Any]]:
    """``q2 compare``'s paired bootstrap of several results files (the first the baseline) with the responses where
    the systems differ most, for the report; None, with a note saying why, when the files cannot be paired."""

    try:
        comparison = compare_files(paths, CompareConfig())
    except (InputFormatError, ValueError) as e:
        if notes is not None:
            notes.append(f"no paired comparison of the files: {e}")
        return None
    return {**comparison.to_dict(), "largest_differences": comparison.largest_differences()}


def report_from_files(inputs: Sequence[str | Path], output: str | Path, title: Optional[str] = None,
                      texts: Optional[str | Path] = None,
                      columns: Sequence[Optional[str]] = _TEXT_COLUMNS,
                      max_rows: Optional[int] = MAX_PAGE_ROWS) -> ReportInput:
    """``q2 report``: read results files one row at a time (and the scored texts from ``texts``, the input of ``q2
    score``) and write one HTML report, its table a stated sample of ``max_rows`` rows when the files hold more
    (None: every row); returns what was read."""
    data = load_results(inputs, max_rows=max_rows)
    if data.n_unread == data.total:
        raise ValueError(f"{', '.join(map(str, inputs))} holds no Q² result rows (q2 score or q2 replay output); "
                         f"to report on an input file, score it first")
    if texts is not None:
        attach_texts(data, texts, columns)
    comparison = comparison_of_files(inputs, data.notes) if len(inputs) > 1 else None
    write_html(output, data.rows, signatures=data.signatures, summary=data.summary,
               title=title or "Q² report: " + ", ".join(Path(s).name for s in data.sources),
               sources=data.sources, config=data.config, version=data.version, notes=data.notes,
               random_weights=data.random_weights, comparison=comparison, shorts=data.shorts, histogram=data.histogram)
    return data
