"""``q2 prefetch``: copy a model's published files into a directory, with a record of where they came from.

The files are copied as the hub serves them (not re-saved), and ``q2_source.json`` beside them names the hub id,
the commit the revision resolved to and the SHA-256 of every file. A run on that directory signs as
``hub:org/name@<commit>``, as a run on the hub does, for as long as its files match the record
(:func:`q2_plugins.metric.signature.model_id`).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Optional

from q2_plugins.metric.errors import model_load_error
from q2_plugins.metric.signature import (
    content_hashes,
    file_sha256,
    hub_snapshot_of,
    model_id,
    read_source_record,
    write_source_record,
)

__all__ = ["prefetch_model", "MODEL_FILES"]

#: files a model needs besides its weights: configuration and tokenizer
MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "added_tokens.json", "spiece.model", "sentencepiece.bpe.model",
               "vocab.json", "vocab.txt", "merges.txt")
_SAFETENSORS = re.compile(r"^model(-\d+-of-\d+)?\.safetensors$|^model\.safetensors\.index\.json$")
_PICKLE = re.compile(r"^pytorch_model(-\d+-of-\d+)?\.bin$|^pytorch_model\.bin\.index\.json$")


def _weights(names: set[str]) -> list[str]:
    """The weight files to take: safetensors where the repository has them, else the pickle checkpoint."""
    safe = sorted(n for n in names if _SAFETENSORS.match(n))
    return safe or sorted(n for n in names if _PICKLE.match(n))


def _hub_files(role: str, name: str, revision: Optional[str]) -> tuple[Path, str]:
    """Download (or find in the local cache) the files a model needs; returns (snapshot folder, commit)."""
    try:
        from huggingface_hub import HfApi, snapshot_download

        folder = Path(snapshot_download(name, revision=revision, allow_patterns=list(MODEL_FILES)))
        commit = folder.name
        try:
            listed = set(HfApi().list_repo_files(name, revision=commit))
        except Exception:  # offline: what the local cache holds
            listed = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
        weights = _weights(listed)
        if not weights:
            raise FileNotFoundError(f"no model.safetensors or pytorch_model.bin in {name}@{commit}")
        folder = Path(snapshot_download(name, revision=commit, allow_patterns=weights))
    except Exception as e:  # noqa: BLE001 - hub errors, offline misses: one message saying what to change
        raise model_load_error(role, name, e) from e
    return folder, commit


def prefetch_model(role: str, name: str, revision: Optional[str], target: str | Path) -> Path:
    """Copy model ``name`` (hub id or directory) into ``target`` and write its ``q2_source.json`` when it comes
    from the hub (or a Hugging Face cache snapshot, or a directory whose record still matches)."""
    target = Path(target)
    source = Path(name).expanduser()
    repo_commit: Optional[tuple[str, str]] = None
    if source.is_dir():
        folder = source
        snapshot, record = hub_snapshot_of(source), read_source_record(source)
        if snapshot is not None:
            repo_commit = snapshot
        elif record is not None and model_id(str(source)).startswith("hub:"):
            repo_commit = (record["repo_id"], record["commit"])
        present = {n for n in content_hashes(source)}
        names = sorted(n for n in present if n in MODEL_FILES) + _weights(present)
    else:
        folder, commit = _hub_files(role, name, revision)
        repo_commit = (name, commit)
        present = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
        names = sorted(n for n in present if n in MODEL_FILES) + _weights(present)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    hashes = {}
    for n in names:
        shutil.copyfile(folder / n, target / n)  # follows the cache's symlinks to the blobs
        hashes[n] = file_sha256(folder / n)  # an LFS blob is named by its SHA-256: not read again
    if repo_commit is not None:
        write_source_record(target, repo_commit[0], repo_commit[1], revision, hashes)
    return target
