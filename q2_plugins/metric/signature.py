"""The reproducibility signature, and the one place that names models and spaCy pipelines.

A :class:`Signature` is a string (the full form: every part ``key:value``, joined by ``|``) with a short,
sacrebleu-style form beside it (:attr:`Signature.short`). Results, caches and adapters compare and store it as a
plain string.

A scorer's signature is derived from the settings' own declarations (:func:`scorer_signature`): each score setting of
:class:`~q2_plugins.metric.config.Q2Config` says in its field metadata how it is written (``sig``) and which cached
stages it changes (``stages``). The full form lays the components' identities and the settings' pieces out in the order
of :data:`SCORER_PARTS`; the short form is read off the full one (:func:`short_parts`); and the cache key of a stage
(:func:`stage_key`) holds the pieces of the settings that name that stage, so a setting written in the signature cannot
be missing from the cache key of a stage it changes.

Model identity (:func:`model_id`):

- a hub id: ``hub:org/name@<commit>``, the commit the local Hugging Face cache resolves the revision to (the
  revision name when the cache does not hold it);
- a directory inside a Hugging Face cache (``.../models--org--name/snapshots/<commit>``): ``hub:org/name@<commit>``;
- a directory with a ``q2_source.json`` record (written by ``q2 prefetch``) whose file hashes still match the
  directory's files: ``hub:org/name@<commit>``, exactly as a run on the hub signs;
- any other directory: ``local:sha256:<digest>``, a hash of its files' names and contents, so byte-identical copies
  are one model wherever they are.

Files are hashed once per process (memoised by path, size, mtime and inode), and the hashes of large files are kept
in a small index (``$Q2_HASH_INDEX``, default ``~/.cache/q2_plugins/file-sha256.json``; empty: no index) under the
same key, so the next process does not read a model's weights again. A file that is a Hugging Face blob named by its
SHA-256 (an LFS file) is not read at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from q2_plugins import __version__
from q2_plugins.metric.config import Q2Config, split_model

__all__ = ["Signature", "model_id", "spacy_id", "content_hashes", "directory_digest", "hub_snapshot_of",
           "SOURCE_RECORD", "read_source_record", "write_source_record", "short_model_id", "replay_signature",
           "SCORER_PARTS", "scorer_signature", "settings_parts", "short_parts", "stage_key"]

#: The file ``q2 prefetch`` writes beside a saved model: hub id, resolved commit, content hashes of the files.
SOURCE_RECORD = "q2_source.json"

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_memo: dict[tuple[str, int, int, int], str] = {}
_memo_lock = threading.Lock()
INDEX_MIN_BYTES = 1 << 20  # smaller files are hashed again rather than indexed
_INDEX_MAX_ENTRIES = 4096
_index_loaded: Optional[Path] = None


class Signature(str):
    """The full signature as a string, built from ``(key, value)`` parts, with a short form.

    ``str(sig)`` / ``sig`` itself is the full form; :attr:`short` is the sacrebleu-style form: package version, the
    three models (``name@commit7`` / ``local:digest8``), the answer comparison and fallback, whether every other
    setting is the paper's, and ``#`` a hash of the full form (two signatures with one short form are equal).
    """

    parts: tuple[tuple[str, str], ...]
    short: str
    _short_parts: tuple[tuple[str, str], ...]

    def __new__(cls, parts: Iterable[tuple[str, str]], short_parts: Optional[Sequence[tuple[str, str]]] = None
                ) -> "Signature":
        parts = tuple((str(k), str(v)) for k, v in parts)
        full = "|".join(f"{k}:{v}" for k, v in parts)
        obj = super().__new__(cls, full)
        obj.parts = parts
        obj._short_parts = tuple((str(k), str(v)) for k, v in short_parts) if short_parts is not None else parts
        digest = hashlib.sha256(full.encode()).hexdigest()[:12]
        obj.short = "|".join(f"{k}:{v}" for k, v in obj._short_parts) + f"|#{digest}"
        return obj

    def __reduce__(self) -> Any:
        return Signature, (self.parts, self._short_parts)

    def get(self, key: str) -> Optional[str]:
        """The value of a part of the full form, or None."""
        return dict(self.parts).get(key)


# -- spaCy ------------------------------------------------------------------------------------------------------------
def spacy_id(nlp: Any) -> str:
    """``spacy:<lang>_<name>-<version>`` of a loaded pipeline."""
    meta = getattr(nlp, "meta", {}) or {}
    return f"spacy:{meta.get('lang', 'xx')}_{meta.get('name', '?')}-{meta.get('version', '?')}"


# -- file contents ----------------------------------------------------------------------------------------------------
def _is_model_file(rel: Path) -> bool:
    """Files that make a model: not hidden files, model cards or the prefetch record."""
    if any(part.startswith(".") for part in rel.parts):
        return False
    return rel.name != SOURCE_RECORD and rel.suffix.lower() != ".md"


def _index_path() -> Optional[Path]:
    configured = os.environ.get("Q2_HASH_INDEX")
    if configured is not None:
        return Path(configured).expanduser() if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "q2_plugins" / "file-sha256.json"


def _index_key(key: tuple[str, int, int, int]) -> str:
    return "|".join(map(str, key))


def _read_index(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str) and _SHA256.match(v)} if isinstance(data, dict) else {}


def _load_index() -> None:
    """Fold the on-disk index into the in-process memo (once per index location)."""
    global _index_loaded
    path = _index_path()
    if path is None or path == _index_loaded:
        return
    _index_loaded = path
    for k, v in _read_index(path).items():
        parts = k.rsplit("|", 3)
        if len(parts) == 4 and all(p.isdigit() for p in parts[1:]):
            _memo.setdefault((parts[0], int(parts[1]), int(parts[2]), int(parts[3])), v)


def _add_to_index(key: tuple[str, int, int, int], digest: str) -> None:
    path = _index_path()
    if path is None:
        return
    try:
        entries = _read_index(path)
        entries[_index_key(key)] = digest
        entries = dict(list(entries.items())[-_INDEX_MAX_ENTRIES:])
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entries), encoding="utf-8")
        os.replace(tmp, path)  # concurrent writers: the last one wins, an entry lost is only hashed again
    except OSError:  # a read-only home: no index, hashing still works
        pass


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's content: free for a Hugging Face LFS blob (named by it), else read once (per process, and
    across processes through the index for large files)."""
    real = Path(os.path.realpath(path))
    if real.parent.name == "blobs" and _SHA256.match(real.name):
        return real.name
    st = real.stat()
    key = (str(real), st.st_size, st.st_mtime_ns, st.st_ino)
    with _memo_lock:
        if st.st_size >= INDEX_MIN_BYTES:
            _load_index()
        if key in _memo:
            return _memo[key]
    h = hashlib.sha256()
    with open(real, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    with _memo_lock:
        _memo[key] = digest
        if st.st_size >= INDEX_MIN_BYTES:
            _add_to_index(key, digest)
    return digest


def content_hashes(directory: str | os.PathLike) -> dict[str, str]:
    """Relative path -> SHA-256 of every model file under ``directory`` (symlinks followed)."""
    root = Path(directory)
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and _is_model_file(rel):
            out[rel.as_posix()] = file_sha256(path)
    return out


def directory_digest(hashes: Mapping[str, str]) -> str:
    """One hash of a directory's ``content_hashes``: names and contents, independent of where it lives."""
    return hashlib.sha256(json.dumps(sorted(hashes.items())).encode()).hexdigest()


# -- Hugging Face cache and prefetch records --------------------------------------------------------------------------
def hub_snapshot_of(directory: str | os.PathLike) -> Optional[tuple[str, str]]:
    """``(repo_id, commit)`` when ``directory`` is a snapshot of a Hugging Face cache, else None."""
    path = Path(os.path.abspath(os.path.expanduser(directory)))
    if path.parent.name != "snapshots" or not _COMMIT.match(path.name):
        return None
    repo_dir = path.parent.parent.name
    if not repo_dir.startswith("models--"):
        return None
    return repo_dir[len("models--"):].replace("--", "/"), path.name


def read_source_record(directory: str | os.PathLike) -> Optional[dict[str, Any]]:
    """The ``q2_source.json`` of a directory, or None (absent or unreadable)."""
    path = Path(directory) / SOURCE_RECORD
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in ("repo_id", "commit")) \
            or not isinstance(record.get("files"), dict):
        return None
    return record


def write_source_record(directory: str | os.PathLike, repo_id: str, commit: str, revision: Optional[str],
                        files: Mapping[str, str]) -> Path:
    """Write ``q2_source.json``: where the model files came from and their SHA-256."""

    path = Path(directory) / SOURCE_RECORD
    record = {"repo_id": repo_id, "revision": revision, "commit": commit, "files": dict(sorted(files.items())),
              "written_by": f"q2_plugins {__version__}"}
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def _resolve_hub(name: str, revision: Optional[str]) -> str:
    rev = revision or "main"
    if _COMMIT.match(rev):
        return rev
    try:
        from huggingface_hub import constants

        ref = Path(constants.HF_HUB_CACHE) / f"models--{name.replace('/', '--')}" / "refs" / rev
        if ref.is_file():
            return ref.read_text().strip()
    except Exception:  # pragma: no cover - huggingface_hub missing or unreadable cache: the revision name
        pass
    return rev


def model_id(name: str, revision: Optional[str] = None) -> str:
    """The identity of a model as the signature and the cache name it (see the module docstring)."""
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        snapshot = hub_snapshot_of(path)
        if snapshot is not None:
            return f"hub:{snapshot[0]}@{snapshot[1]}"
        hashes = content_hashes(path)
        record = read_source_record(path)
        if record is not None and record["files"] == hashes:
            return f"hub:{record['repo_id']}@{record['commit']}"
        return f"local:sha256:{directory_digest(hashes)[:16]}"
    return f"hub:{name}@{_resolve_hub(name, revision)}"


def short_model_id(full: str) -> str:
    """``t5-base-...@1a2b3c4[float32]`` from ``hub:org/t5-base-...@<commit>[float32]``; ``local:<8 hex>`` locally.
    An implementation's name before the model's id (``fcoref-head-v1:hub:...``) is left out."""
    _, sep, rest = full.partition(":")
    if sep and rest.startswith(("hub:", "local:")):
        return short_model_id(rest)
    m = re.match(r"^hub:(?:[^/@]+/)?([^@]+)@([^\[]+)(\[.*\])?$", full)
    if m:
        commit = m.group(2)
        return f"{m.group(1)}@{commit[:7] if _COMMIT.match(commit) else commit}{m.group(3) or ''}"
    m = re.match(r"^local:sha256:([0-9a-f]+)(\[.*\])?$", full)
    if m:
        return f"local:{m.group(1)[:8]}{m.group(2) or ''}"
    return full


def replay_signature(normalization: str, nli: Optional[str] = None, discard_unanswerable: bool = False) -> Signature:
    """The signature of a replay of recorded original-pipeline steps (``nli``: the NLI model's id, when used;
    ``discard_unanswerable``: the Q²* rule)."""

    parts = [("q2", __version__), ("replay", "recorded-steps"), ("norm", normalization),
             ("cmp", "f1+nli" if nli else "f1")]
    if discard_unanswerable:
        parts.append(("questions", "discard-unanswerable"))
    if nli:
        parts.append(("nli", nli))
    return Signature(parts, [(k, short_model_id(v) if k == "nli" else v) for k, v in parts])



# -- a scorer's signature, derived from the settings' declarations ---------------------------------------------------
@dataclass(frozen=True)
class Part:
    """One part of a scorer's full signature: the identity of a ``component`` (a stage's name), or else the pieces
    that the score settings naming ``key`` in their ``sig`` write, joined by ``joiner``. ``needs``: written only
    when this (boolean) attribute of the config holds (``uses_nli``: scoring uses the NLI model; ``coref``).
    ``stage``: the settings of this part are those of that stage's component (the settings naming the stage, and
    no other), so the part is also that stage's cache key. ``backend``: written only when that stage's model string
    names this backend, or one of these (settings that only their components read, such as the ``hf`` QA model's
    windows; the ``ct2`` NLI model and the ``onnx`` QA model read the same windows as the ``hf`` ones)."""

    key: str
    component: Optional[str] = None
    joiner: str = "-"
    needs: Optional[str] = None
    stage: Optional[str] = None
    backend: Union[str, tuple[str, ...], None] = None

    def written(self, config: Q2Config) -> bool:
        """Whether the settings ``config`` use this part."""
        return (self.needs is None or bool(getattr(config, self.needs))) and self.read_by_backend(config)

    def read_by_backend(self, config: Q2Config) -> bool:
        """Whether the component of this part's stage reads its settings (always, for a part of no backend)."""
        if self.backend is None:
            return True
        names = (self.backend,) if isinstance(self.backend, str) else self.backend
        return split_model(getattr(config, f"{self.stage}_model"))[0] in names


#: The parts of a scorer's signature, in order (``q2`` is the package version).
SCORER_PARTS = (
    Part("q2"), Part("cand", "candidates"), Part("qg", "qg"), Part("qg-dec", stage="qg"),
    Part("questions", joiner="+"), Part("qa", "qa"), Part("qa-dec", stage="qa", backend=("hf", "onnx")),
    Part("personal"),
    Part("norm"), Part("cmp"), Part("fallback"), Part("nli", "nli", needs="uses_nli"),
    Part("nli-dec", needs="uses_nli", stage="nli", backend=("hf", "ct2")),
    Part("coref", "coref", needs="coref"), Part("coref-dec", needs="coref", stage="coref"), Part("budget"),
)
#: The short form: these parts of the full form (full key -> short key, in this order; component identities
#: shortened by :func:`short_model_id`), then ``cfg`` (``paper`` or ``custom``), then ``#`` a hash of the full form.
SHORT_KEYS = {"q2": "q2", "qg": "qg", "qa": "qa", "nli": "nli", "cmp": "cmp", "fallback": "fb", "coref": "coref"}


def _pieces(config: Q2Config, names: Optional[Sequence[str]] = None, ids: Optional[Mapping[str, str]] = None
            ) -> dict[str, list[str]]:
    """Signature part -> the pieces its settings write (``names``: only these settings), in declaration order; a
    setting that does not act under the others (its ``when``) writes nothing. ``ids`` fill in the components'
    identities (without them a piece such as ``remove:{personal}`` stays as it is)."""
    pieces: dict[str, list[str]] = {}
    for name, how in config.signed():
        if (names is None or name in names) and how.applies(config):
            piece = how.piece(getattr(config, name), ids)
            if piece is not None:
                pieces.setdefault(how.part, []).append(piece)
    return pieces


def settings_parts(config: Q2Config, ids: Optional[Mapping[str, str]] = None) -> tuple[tuple[str, str], ...]:
    """The settings parts of a scorer's signature, in order; without ``ids``, before the components' identities
    are filled in: two configs with the same ones sign alike with the same components."""
    pieces = _pieces(config, ids=ids)
    return tuple((p.key, p.joiner.join(pieces.get(p.key, []))) for p in SCORER_PARTS
                 if p.component is None and p.key != "q2" and p.written(config))


_PAPER = settings_parts(Q2Config())


def short_parts(parts: Sequence[tuple[str, str]], paper: bool) -> list[tuple[str, str]]:
    """The short form's parts, read off the full form's ``parts`` (:data:`SHORT_KEYS`); ``paper``: the settings
    parts of the full form are the paper's."""
    full = dict(parts)
    components = {p.key for p in SCORER_PARTS if p.component is not None}
    out = [(short, short_model_id(full[key]) if key in components else full[key])
           for key, short in SHORT_KEYS.items() if key in full]
    return out + [("cfg", "paper" if paper else "custom")]


def scorer_signature(config: Q2Config, ids: Mapping[str, str], version: str) -> Signature:
    """The signature of a scorer. ``ids`` maps a component (a stage's name) to its identity; only the components
    the settings use are looked up (a mapping that computes identities on demand is enough)."""
    settings = dict(settings_parts(config, ids))
    parts = [(p.key, version if p.key == "q2" else ids[p.component] if p.component else settings[p.key])
             for p in SCORER_PARTS if p.written(config)]
    return Signature(parts, short_parts(parts, settings_parts(config) == _PAPER))


def stage_key(config: Q2Config, stage: str, component: str, version: str = "") -> str:
    """The cache namespace of ``stage``: its name, its component's identity, and the pieces of the settings that
    change its outputs (their ``stages`` name it; as the signature writes them), or ``version`` for a stage that
    no setting changes (a definition's version)."""
    pieces = _pieces(config, config.stage_names(stage))
    settings = "|".join(p.joiner.join(pieces[p.key]) for p in SCORER_PARTS
                        if p.key in pieces and p.read_by_backend(config))
    return f"{stage}|{component}|{settings or version}"
