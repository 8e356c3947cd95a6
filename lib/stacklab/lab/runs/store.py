"""The run store: one folder per run key, so one link trains once.

The store makes no key: it files a run under the one it carries (`Run.key`, from
`stacklab.lab.keys.run_key`), 32 hex digits of a hash of everything that decides the
result: the stack as the resolver sees it (not its comments or layout), the input shape
and dtype, the dtype, every setting but ``device``, which counts by its kind (cpu, cuda or
mps), and the stacklab and torch versions. Training is deterministic on CPU, so two runs
with one key end with bitwise-identical parameters: a server trains a key once and hands
the stored result to everyone who asks. A folder reads back only if its stored settings
give its key again.

One folder per key under ``STACKLAB_RUNS`` (default ``~/.cache/stacklab/runs``), for
finished and diverged runs: ``model.safetensors``, ``metrics.json``, ``record.safetensors``
(initial tables, snapshots, attention maps, summed gradients), ``run.json`` (settings,
status, curves) and, for runs a worker trained, ``figures.json`` (every figure, drawn by
the worker); a stopped run leaves its worker in a private folder (`save_private`).
`RunStore.open` reads a run without its tensors (`StoredRun`), for a server to show it.
A folder is written under a temporary name and renamed into place, so a crash never
leaves a half-written run under a key; one that does not read back completely is skipped
with a log line. The store holds at most ``STACKLAB_RUNS_MAX_BYTES`` (default 2 GiB): the
least recently used runs go first.

``STACKLAB_RUNS`` may also be a URL, ``s3://BUCKET/PREFIX`` (`stacklab.lab.runs.bucket`):
a run is then written to the bucket before it appears in this machine's copy
(``STACKLAB_RUNS_CACHE``, at most ``STACKLAB_RUNS_CACHE_BYTES``, default 1 GiB), and a run
another server stored is read from the bucket once, into that copy, by the first reader
(the others wait for it). The bucket's oldest runs go first past the byte bound.

>>> import tempfile, stacklab
>>> store = RunStore(tempfile.mkdtemp())
>>> run = stacklab.train(task="position", steps=20)
>>> store.save(run) is not None, store.load(run.key).final == run.final
(True, True)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
import weakref
from pathlib import Path

from ...core.errors import StackError
from .bucket import Bucket, is_url
from ..keys import KEY_LENGTH, is_key
from .files import FIGURES, RUN, damaged, write_run, write_text
from .folders import drop_until, folder_bytes, last_used
from .listing import RecentListing
from .stored import StoredRun, _read_run, _touch, bucket_damage
from ..train.record import Run

log = logging.getLogger("stacklab.store")

DEFAULT_MAX_BYTES = 2 << 30
DEFAULT_CACHE_BYTES = 1 << 30
STORED_STATUSES = ("finished", "diverged")  # complete and deterministic; a stopped run is not
_STALE_TMP_SECONDS = 3600
_FETCHING: dict[Path, threading.Lock] = {}  # one fetch of a run at a time, in this process
_FETCHING_LOCK = threading.Lock()


def default_location() -> str:
    """``STACKLAB_RUNS``: a local folder (default ``~/.cache/stacklab/runs``) or a URL."""
    return os.environ.get("STACKLAB_RUNS") or str(Path.home() / ".cache" / "stacklab" / "runs")


def _bytes_variable(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    return int(raw) if raw.strip().isdigit() else default


def default_max_bytes() -> int:
    return _bytes_variable("STACKLAB_RUNS_MAX_BYTES", DEFAULT_MAX_BYTES)


def cache_folder(url: str) -> Path:
    """This machine's copy of the runs of the store at ``url`` (``STACKLAB_RUNS_CACHE``, by
    default a folder of ``~/.cache/stacklab/bucket-cache`` named after the URL)."""
    raw = os.environ.get("STACKLAB_RUNS_CACHE")
    name = hashlib.sha256(url.encode()).hexdigest()[:16]
    return Path(raw) if raw else Path.home() / ".cache" / "stacklab" / "bucket-cache" / name


def local_folder(location: str) -> Path:
    """The local folder of the store at ``location``: the store itself, or its cache."""
    return cache_folder(location) if is_url(location) else Path(location)


class RunStore:
    """Finished runs by key, on disk or in a bucket; see the module docstring. Safe across
    processes: every write is a rename (on disk) or a manifest written last (in a bucket),
    and a reader only ever sees whole runs."""

    def __init__(self, root: str | Path | None = None, max_bytes: int | None = None):
        self.location = str(root) if root is not None else default_location()
        self.bucket = Bucket(self.location) if is_url(self.location) else None
        self.root = local_folder(self.location)  # the store, or this machine's cache of it
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes
        self.cache_bytes = _bytes_variable("STACKLAB_RUNS_CACHE_BYTES", DEFAULT_CACHE_BYTES)
        self.problem: StackError | None = None  # the bucket's last failure, for a reader
        self._listed = RecentListing()  # short keys that name no run: one listing for many

    def path(self, key: str) -> Path:
        if not is_key(key):
            raise StackError("E_VALUE", f"{str(key)[:40]!r} is not a run key",
                             hint=f"a run key is {KEY_LENGTH} hex digits, as in run=... of a link",
                             where="run key")
        return self.root / key

    def __contains__(self, key: str) -> bool:
        try:
            if not is_key(key) or (self.root / key / RUN).is_file():
                return is_key(key)
            return self.bucket is not None and self.bucket.has(key)
        except OSError:
            return False
        except StackError as err:
            self.problem = err
            return False

    def touch(self, key: str) -> None:
        """Count ``key`` as just used (a run served from memory), for eviction."""
        if is_key(key):
            _touch(self.root / key)

    def keys(self) -> list[str]:
        """Every stored key, least recently used first (in a bucket: oldest first)."""
        if self.bucket is not None:
            try:
                return [entry.key for entry in self.bucket.entries()]
            except StackError as err:
                self.problem = err
                return []
        return self._folders()

    def _folders(self) -> list[str]:
        """The keys with a folder here, least recently used first."""
        try:
            found = [p for p in self.root.iterdir() if is_key(p.name) and p.is_dir()]
        except OSError:
            return []
        return [p.name for p in sorted(found, key=last_used)]

    def find(self, prefix: str) -> str | None:
        """The one stored key starting with ``prefix`` (8 or more hex digits, as the app and
        the comparison tables show keys), or None (no match, or more than one)."""
        prefix = str(prefix).strip().lower()
        if is_key(prefix):
            return prefix if prefix in self else None
        try:
            found = self.matching(prefix)
        except StackError as err:
            self.problem = err
            return None
        return found[0] if len(found) == 1 else None

    def matching(self, prefix: str) -> list[str]:
        """The stored keys starting with ``prefix`` (8 to 32 hex digits; anything else
        matches none). In a bucket, this machine's copy first, then a listing of the bucket
        that stays a few seconds (`RecentListing`): many starts that name no run cost one
        listing. Raises `StackError` when the bucket cannot be listed."""
        prefix = str(prefix).strip().lower()
        if len(prefix) < 8 or len(prefix) > KEY_LENGTH or any(c not in "0123456789abcdef"
                                                               for c in prefix):
            return []
        found = [key for key in self._folders() if key.startswith(prefix)]  # this machine's
        if self.bucket is not None and len(found) != 1:  # a bucket: listed only when needed
            listed = self._listed.keys(lambda: [entry.key for entry in self.bucket.entries()])
            found = [key for key in listed if key.startswith(prefix)]
        return found

    def trouble(self, key: str) -> StackError | None:
        """Why the run ``key`` does not open (after `open` gave None): its files damaged
        (``E_DAMAGED``), or the bucket refusing the credentials or not answering
        (``E_VALUE``); None when there is no such run, for a page to say so."""
        if not is_key(key):
            return None
        folder = self.root / key
        found = bucket_damage(folder, key)
        if found is not None:
            return found
        if (folder / RUN).is_file():  # here, and did not read back
            return damaged(folder, key, RUN, "does not read back")
        if self.bucket is None:
            return None
        try:
            self.bucket.has(key)
        except StackError as err:
            return err
        return None

    def size(self) -> int:
        if self.bucket is not None:
            try:
                return sum(entry.bytes for entry in self.bucket.entries())
            except StackError as err:
                self.problem = err
                return 0
        return sum(folder_bytes(self.root / key) for key in self.keys())

    # -- writing ----------------------------------------------------------------------

    def save(self, run, figures: dict | None = None) -> Path | None:
        """Store ``run`` under its key (a finished or diverged run; others are not kept),
        with its ``figures`` (`stacklab.lab.figures.figures_json`) when they are drawn.

        Returns the folder, or None when the run is not kept (its status, or it alone is
        larger than the store). An existing run of the key is left as it is. In a bucket,
        the run goes there before it appears here; a bucket that cannot be written raises
        `StackError` and keeps nothing.
        """
        if run.status not in STORED_STATUSES:
            return None
        final = self.path(run.key)
        if final.exists() or self._fetch(run.key):
            if self.load(run.key, device="cpu") is not None and self._whole(run.key):
                if self.bucket is not None:
                    self.bucket.put(run.key, final)  # nothing when the bucket has it
                return final  # stored already (and now the most recently used)
            aside = self.root / f".tmp-damaged-{run.key}-{uuid.uuid4().hex[:8]}"
            os.rename(final, aside)  # a damaged folder must not block its key; cleared later
            if self.bucket is not None:
                self.bucket.remove(run.key)  # nor a damaged run in the bucket
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".tmp-{run.key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            write_run(tmp, run, figures)
            if folder_bytes(tmp) > self.max_bytes:
                log.warning("not storing run %s: it alone is larger than the store", run.key)
                return None
            if self.bucket is not None:
                self.bucket.put(run.key, tmp)  # whole, or raises: then it is not kept here
            try:
                os.rename(tmp, final)  # atomic: the key appears whole or not at all
            except OSError:
                if not final.exists():
                    raise
                return final  # another process stored the same run first
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._listed.forget()  # a short key of this run names it from now on
        self.evict(keep=run.key)
        return final

    def add_figures(self, key: str, figures: dict) -> bool:
        """Write ``figures`` into the stored run ``key`` (stored without them: a worker draws
        them after storing the run), whole or not at all; False when it is not stored."""
        folder = self.path(key)
        if not (folder / RUN).is_file():
            return False
        part = folder / f".figures-{uuid.uuid4().hex[:8]}.json"
        text = json.dumps(figures) + "\n"
        write_text(part, text)
        os.replace(part, folder / FIGURES)
        if self.bucket is not None:
            self.bucket.put_figures(key, text.encode())
        return True

    def save_private(self, run, figures: dict | None = None) -> Path:
        """Write ``run`` (whatever its status) to a private folder of the store, for one
        reader to take back (`take_private`, `hold_private`): how a stopped run leaves a
        worker process."""
        self.root.mkdir(parents=True, exist_ok=True)
        folder = self.root / f".private-{run.key}-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        write_run(folder, run, figures)
        if self.bucket is not None:  # for an app server on another machine (Ray)
            try:
                self.bucket.put_private(folder)
            except StackError as err:  # this machine's server still reads it here
                log.warning("the stopped run %s stays on this machine: %s", run.key, err.message)
        return folder

    def hold_private(self, folder: str | Path) -> StoredRun | None:
        """The run in a private folder written by `save_private`, read without its tensors;
        the folder goes when the returned `StoredRun` is dropped (or, untouched for an
        hour, at the next eviction)."""
        folder = self._private(Path(folder))
        held = None if folder is None else self._read_private(folder, StoredRun)
        if held is not None:
            weakref.finalize(held, shutil.rmtree, folder, True)
        return held

    def take_private(self, folder: str | Path, device: str | None = "cpu") -> Run | None:
        """The run in a private folder written by `save_private`; the folder is removed."""
        folder = self._private(Path(folder))
        run = None if folder is None else self._read_private(
            folder, lambda folder, key: _read_run(folder, key, device))
        if run is not None:
            shutil.rmtree(folder, ignore_errors=True)
        return run

    def _private(self, folder: Path) -> Path | None:
        """The private folder ``folder`` of this store, here: with a bucket, one a worker
        wrote on another machine is copied here (by its name) and leaves the bucket."""
        if not folder.name.startswith(".private-"):
            return None
        if self.bucket is None:
            return folder if folder.parent == self.root else None
        here = self.root / folder.name
        try:
            if here.is_dir():
                self.bucket.take_private(folder.name, None)  # written on this machine
            else:
                here.mkdir(parents=True)
                self.bucket.take_private(folder.name, here)
        except StackError as err:
            log.warning("the stopped run in %s cannot be read: %s", folder.name, err.message)
        return here

    def _read_private(self, folder: Path, read):
        """``read(folder, key)`` of a private folder of this store, or None: damaged (logged
        and removed)."""
        name = folder.name
        try:
            return read(folder, name.split("-")[1])
        except Exception as err:  # noqa: BLE001 - damage means: no run
            log.warning("ignoring the private run folder %s: %s: %s", name, type(err).__name__,
                        err)
            shutil.rmtree(folder, ignore_errors=True)
            return None

    def evict(self, keep: str | None = None) -> list[str]:
        """Remove least recently used runs until the store fits ``max_bytes`` (in a bucket:
        the oldest runs there, and this machine's copy fits ``cache_bytes``)."""
        removed = self._fit_folders(self.max_bytes if self.bucket is None else self.cache_bytes,
                                    keep)
        self._clear_stale_tmp()
        if self.bucket is None:
            return removed
        try:
            entries = [(entry.key, entry.bytes) for entry in self.bucket.entries()]
            removed = drop_until(self.max_bytes, entries, keep, self._remove_from_bucket)
            self.bucket.clear_stale()
        except StackError as err:  # the run is stored: the next eviction tries again
            self.problem = err
            log.warning("the run store's eviction did not finish: %s", err.message)
        return removed

    def _remove_from_bucket(self, key: str) -> None:
        self.bucket.remove(key)
        shutil.rmtree(self.root / key, ignore_errors=True)

    def _clear_stale_tmp(self) -> None:
        now = time.time()
        for path in [*self.root.glob(".tmp-*"), *self.root.glob(".private-*")]:  # held: touched
            try:
                if now - path.stat().st_mtime > _STALE_TMP_SECONDS:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass

    # -- reading ----------------------------------------------------------------------

    def open(self, key: str) -> StoredRun | None:
        """The stored run of ``key`` without its tensors, or None (as `load`)."""
        return self._read(key, lambda folder: StoredRun(folder, key))

    def _whole(self, key: str) -> bool:
        """Does the stored run of ``key`` read back whole, its JSON files included?"""
        stored = self.open(key)
        return stored is not None and stored.damage() is None

    def load(self, key: str, device: str | None = "cpu") -> Run | None:
        """The stored `Run` of ``key``, or None (unknown key, or a folder that does not read
        back completely: logged and skipped, never shown as finished)."""
        return self._read(key, lambda folder: _read_run(folder, key, device))

    def _read(self, key: str, read):
        """``read(folder)`` of a whole stored run of ``key`` (then counted as used), or None."""
        if not is_key(key):
            return None
        folder = self.root / key
        try:
            if not (folder / RUN).is_file() and not self._fetch(key):
                return None
            damage = bucket_damage(folder, key)
            if damage is not None and not (folder / RUN).is_file():
                raise damage  # its run.json did not match the bucket's manifest
            found = read(folder)
        except StackError as err:
            self.problem = err
            log.warning("ignoring the stored run %s: %s", key, err.message)
            return None
        except Exception as err:  # noqa: BLE001 - any damage means: not a stored run
            log.warning("ignoring the stored run %s: %s: %s", key, type(err).__name__, err)
            return None
        _touch(folder)
        return found

    def _fetch(self, key: str) -> bool:
        """Copy the run ``key`` from the bucket into this machine's cache, once (a reader
        that asks meanwhile waits for it): False when there is no bucket or no such run."""
        if self.bucket is None:
            return False
        final = self.root / key
        with _FETCHING_LOCK:
            lock = _FETCHING.setdefault(final, threading.Lock())
        with lock:
            if final.exists():
                return True  # fetched meanwhile (or by another process)
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.root / f".tmp-{key}-{uuid.uuid4().hex[:8]}"
            tmp.mkdir()
            try:
                if not self.bucket.fetch(key, tmp):
                    return False
                try:
                    os.rename(tmp, final)  # whole, or not at all
                except OSError:
                    if not final.exists():
                        raise
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        self.problem = None
        self._fit_folders(self.cache_bytes, keep=key)  # this machine's copy stays bounded
        return True

    def _fit_folders(self, bound: int, keep: str | None) -> list[str]:
        """Remove the least recently used folders here until they fit ``bound``."""
        keys = self._folders()
        return drop_until(bound, [(key, folder_bytes(self.root / key)) for key in keys], keep,
                           lambda key: shutil.rmtree(self.root / key, ignore_errors=True))
