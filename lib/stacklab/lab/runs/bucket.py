"""The run store's runs in object storage, when ``STACKLAB_RUNS`` is a URL: ``s3://BUCKET/PREFIX``
(the extra ``stacklab[s3]``, any S3-compatible server) or whatever else fsspec reaches
(``gs://`` with its package installed).

Object storage has no rename and no lock, so a run is written as its files in a folder of
their own, ``KEY/<writer>/`` (a writer never touches another's), then one small object last,
``KEY/manifest.json``, naming that folder and each file with its size and SHA-256. A key
without its manifest does not exist to readers; a file that does not match it is damaged
(`E_DAMAGED`, that run alone). The manifest is written with ``If-None-Match: *``, so of
two servers finishing one key at once the first manifest wins and the other writer removes
its own files. Where a server ignores that header, the last manifest wins instead: each
names a whole set of files, so readers still see one complete run. ``figures.json``, which
a worker draws after storing the run, is written into the manifest's folder under a name
of its own hash (``figures-HASH.json``), then the manifest again with it added (size,
hash and that name): two servers adding figures at once each name an object that is
whole, so the last manifest is whole too.

The endpoint and the credentials come from the standard places only (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, the AWS config files): a URL that carries
any is refused, and no message of this module repeats them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ...core.errors import StackError
from .files import METRICS, MODEL, RECORD, RUN

RUN_FILES = {MODEL, RECORD, METRICS, RUN}  # a run's files, written before its manifest

log = logging.getLogger("stacklab.store")

MANIFEST, FIGURES = "manifest.json", "figures.json"
MANIFEST_FILES = RUN_FILES | {FIGURES}  # what a manifest may name
PRIVATE = ".private"  # stopped runs, handed from a worker on another machine to its server
MANIFEST_FORMAT = "stacklab-manifest-1"
DAMAGE = ".damage.json"  # in a cached copy: the files that did not match the manifest
_MANIFEST_MAX_BYTES = 1 << 20
_STALE_PARTS_SECONDS = 3600  # a writer's files without a manifest this old: a dead writer's
_SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
# S3 only: give up quickly on a server that cannot be reached (a page waits on it)
_S3_OPTIONS = {"config_kwargs": {"connect_timeout": 5, "read_timeout": 30,
                                 "retries": {"max_attempts": 2}},
               "max_concurrency": 1}  # one GET per object: no HEAD first for its size


def is_url(location: str) -> bool:
    """Is ``location`` (``STACKLAB_RUNS``) object storage rather than a local folder?"""
    scheme = urlsplit(str(location)).scheme
    return len(scheme) > 1 and scheme != "file"  # one letter: a Windows drive


@dataclass(frozen=True)
class Entry:
    """A run in the bucket: its key, its bytes (every object under it) and when its
    manifest was written (seconds since the epoch)."""
    key: str
    bytes: int
    written: float


class Bucket:
    """The runs under one URL; see the module docstring. Every failure to reach the store
    is a `StackError` ``E_VALUE`` that names the URL and never a credential."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        if parts.username or parts.password or parts.query:
            raise StackError("E_VALUE", "the run store's URL (STACKLAB_RUNS) carries "
                             "credentials or options, which are refused",
                             hint="give only PROTOCOL://BUCKET/PREFIX; put the endpoint and "
                                  "the keys in AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID and "
                                  "AWS_SECRET_ACCESS_KEY (or the AWS config files)",
                             where="STACKLAB_RUNS")
        self.url = url.rstrip("/")
        try:
            import fsspec  # noqa: PLC0415 - only a store on a URL needs it

            options = dict(_S3_OPTIONS) if parts.scheme in ("s3", "s3a") else {}
            self.fs, self.prefix = fsspec.core.url_to_fs(
                self.url, skip_instance_cache=True, use_listings_cache=False, **options)
        except (ImportError, ValueError) as err:
            raise StackError("E_VALUE", f"the run store {self.url} needs a package that is "
                             f"not installed ({_said(err)})",
                             hint="for s3://, install the extra: pip install 'stacklab[s3]'",
                             where=self.url) from None
        self.prefix = self.prefix.rstrip("/")
        if hasattr(self.fs, "retries"):
            self.fs.retries = 2  # s3fs tries 5 times, with pauses: a page would wait on it

    def _at(self, *names: str) -> str:
        return "/".join((self.prefix, *names))

    # -- reading ----------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """Every whole run (one with a manifest), the oldest first; one listing."""
        found: dict[str, list] = {}
        for path, info in self._call("list", self.fs.find, self.prefix, detail=True).items():
            key, _, rest = path[len(self.prefix) + 1:].partition("/")
            sizes = found.setdefault(key, [0, None, 0.0])
            sizes[0] += int(info.get("size") or 0)
            if rest == MANIFEST:
                sizes[1] = _seconds(info)
            elif "/" in rest:  # a writer's file: its folder's name says when it began
                sizes[2] = max(sizes[2], _began(rest.partition("/")[0]))
        # the server's clock (whole seconds), then the writers' for runs of one second
        ordered = sorted((item for item in found.items() if item[1][1] is not None),
                         key=lambda item: (item[1][1], item[1][2]))
        return [Entry(key, size, written) for key, (size, written, _) in ordered]

    def has(self, key: str) -> bool:
        return bool(self._call("read", self.fs.exists, self._at(key, MANIFEST)))

    def fetch(self, key: str, folder: Path) -> bool:
        """Copy the run ``key`` into ``folder`` (made by the caller), checking each file
        against the manifest: one that does not match is left out and named in ``DAMAGE``.
        False when the bucket has no manifest for ``key`` (or no readable one)."""
        manifest = self._manifest(key)
        if manifest is None:
            return False
        paths = {self._at(key, manifest["folder"], entry.get("object", name)): name
                 for name, entry in manifest["files"].items()}
        found = self._call("read", self.fs.cat, list(paths), on_error="return")  # at once
        damage = {}
        for path, name in paths.items():
            data = found.get(path)
            if isinstance(data, FileNotFoundError):
                data = None
            elif isinstance(data, BaseException):
                raise self._failure("read", data)
            what = _mismatch(data, manifest["files"][name])
            if what is not None:
                damage[name] = what
            elif data is not None:
                (folder / name).write_bytes(data)
        if damage:
            (folder / DAMAGE).write_text(json.dumps(damage), encoding="utf-8")
        return True

    def _manifest(self, key: str) -> dict | None:
        data = self._object(self._at(key, MANIFEST))
        if data is None:
            return None
        try:
            manifest = json.loads(data[:_MANIFEST_MAX_BYTES])
            if (manifest.get("format") != MANIFEST_FORMAT or manifest.get("key") != key
                    or "/" in manifest["folder"] or not set(manifest["files"]) <= MANIFEST_FILES
                    or any("/" in str(entry.get("object", "")) or "object" in entry
                           and not str(entry["object"]).startswith("figures-")
                           for entry in manifest["files"].values())):
                raise ValueError("not a manifest of this key")
            return manifest
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            log.warning("run %s in %s has a damaged manifest: %s", key, self.url, _said(err))
            return None

    def _object(self, path: str) -> bytes | None:
        """The bytes of ``path``, or None when there is no such object."""
        try:
            return self._call("read", self.fs.cat_file, path)
        except FileNotFoundError:
            return None

    # -- writing ----------------------------------------------------------------------

    def put(self, key: str, folder: Path) -> bool:
        """Upload the run in ``folder`` as ``key``: its files, then its manifest. False when
        a whole run of ``key`` is there already (written first by another server)."""
        if self.has(key):
            return False
        writer = f"{time.time_ns():x}-{uuid.uuid4().hex[:8]}"  # when it began, and who
        files = {}
        for path in sorted(folder.iterdir()):
            if path.name in MANIFEST_FILES:
                data = path.read_bytes()
                self._call("write", self.fs.pipe_file, self._at(key, writer, path.name), data)
                files[path.name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        manifest = json.dumps({"format": MANIFEST_FORMAT, "key": key, "folder": writer,
                               "files": files}).encode()
        try:
            self._call("write", self.fs.pipe_file, self._at(key, MANIFEST), manifest,
                       **({"mode": "create"} if self._conditional else {}))
        except StackError as refused:
            if not self._has_after(refused, key):
                raise
            self._remove_quietly(self._at(key, writer))  # another server's manifest came first
            return False
        return True

    def _has_after(self, refused: StackError, key: str) -> bool:
        """Was ``refused`` (a manifest's write) another writer's manifest coming first?
        Raises ``refused`` itself when the bucket cannot say."""
        try:
            return self.has(key)
        except StackError:
            raise refused from None

    @property
    def _conditional(self) -> bool:
        """Does this file system take ``mode="create"`` (``If-None-Match: *``)?"""
        return type(self.fs).__name__ == "S3FileSystem"

    def put_figures(self, key: str, data: bytes) -> None:
        """Add ``figures.json`` to the stored run ``key`` (nothing when it is not stored):
        the object under a name of its hash, then the manifest naming it."""
        manifest = self._manifest(key)
        if manifest is None:
            return
        digest = hashlib.sha256(data).hexdigest()
        name = f"figures-{digest[:16]}.json"
        self._call("write", self.fs.pipe_file, self._at(key, manifest["folder"], name), data)
        manifest["files"][FIGURES] = {"bytes": len(data), "sha256": digest, "object": name}
        self._call("write", self.fs.pipe_file, self._at(key, MANIFEST),
                   json.dumps(manifest).encode())

    def put_private(self, folder: Path) -> None:
        """Upload a private folder (`RunStore.save_private`), for its one reader."""
        for path in sorted(folder.iterdir()):
            if path.is_file():
                self._call("write", self.fs.pipe_file, self._at(PRIVATE, folder.name, path.name),
                           path.read_bytes())

    def take_private(self, name: str, folder: Path | None) -> None:
        """Copy the private folder ``name`` into ``folder`` (None: nowhere), then remove it
        from the bucket."""
        if folder is not None:
            paths = self._call("list", self.fs.find, self._at(PRIVATE, name))
            for path, data in self._call("read", self.fs.cat, paths).items():
                (folder / path.rsplit("/", 1)[-1]).write_bytes(data)
        self._remove_quietly(self._at(PRIVATE, name))

    def remove(self, key: str) -> None:
        """Drop the run ``key``: its manifest first, so that it stops existing at once."""
        self._remove_quietly(self._at(key, MANIFEST))
        self._remove_quietly(self._at(key))

    def clear_stale(self) -> None:
        """Remove the files of writers that died before their manifest (an hour old)."""
        now = time.time()
        listing = self._call("list", self.fs.find, self.prefix, detail=True)
        named = {path.rsplit("/", 1)[0] for path in listing if path.endswith("/" + MANIFEST)}
        for path, info in listing.items():
            key, _, rest = path[len(self.prefix) + 1:].partition("/")
            writer = rest.partition("/")[0]
            if ("/" in rest and self._at(key) not in named
                    and now - (_seconds(info) or now) > _STALE_PARTS_SECONDS):
                self._remove_quietly(self._at(key, writer))

    def _remove_quietly(self, path: str) -> None:
        try:
            self.fs.rm(path, recursive=True)
        except Exception:  # noqa: BLE001 - gone already, or left for `clear_stale`
            pass

    def _call(self, doing: str, action, *args, **kwargs):
        """``action(*args)``, every failure but a missing object a `StackError` naming the
        URL: refused credentials, a server that cannot be reached, a refused write."""
        try:
            return action(*args, **kwargs)
        except FileNotFoundError:
            raise
        except Exception as err:  # noqa: BLE001 - the store's client raises many kinds
            raise self._failure(doing, err) from None

    def _failure(self, doing: str, err: BaseException) -> StackError:
        if isinstance(err, PermissionError):
            return StackError("E_VALUE", f"the run store {self.url} refuses the credentials "
                              f"({_said(err)})",
                              hint="check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the "
                                   "AWS config files): the key must read, list and write the "
                                   "bucket", where=self.url)
        full = (" (a bucket past its quota refuses writes: raise the quota, or lower "
                "STACKLAB_RUNS_MAX_BYTES below it)" if doing == "write" else "")
        return StackError("E_VALUE", f"the run store {self.url} cannot {doing} ({_said(err)})",
                          hint="check that the server at AWS_ENDPOINT_URL runs and that the "
                               f"bucket exists{full}, or set STACKLAB_RUNS to a local folder",
                          where=self.url)


def _mismatch(data: bytes | None, expected: dict) -> str | None:
    """How ``data`` differs from the manifest's ``expected`` size and hash, or None."""
    if data is None:
        return "is missing"
    if len(data) != expected.get("bytes"):
        return f"is truncated or damaged ({len(data)} bytes, {expected.get('bytes')} written)"
    if hashlib.sha256(data).hexdigest() != expected.get("sha256"):
        return "is damaged (its hash differs from the one written)"
    return None


def _began(writer: str) -> float:
    try:
        return int(writer.partition("-")[0], 16) / 1e9
    except ValueError:
        return 0.0


def _seconds(info: dict) -> float | None:
    modified = info.get("LastModified") or info.get("mtime") or info.get("updated")
    if modified is None:
        return None
    return modified.timestamp() if hasattr(modified, "timestamp") else float(modified)


def _said(err: BaseException) -> str:
    """``err`` in a few words, with any credential of the environment blanked out."""
    text = f"{type(err).__name__}: {err}"
    for name in _SECRETS:  # blanked in the whole text, then cut: no secret is cut in two
        secret = os.environ.get(name, "")
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    return text[:200 + len(type(err).__name__) + 2]
