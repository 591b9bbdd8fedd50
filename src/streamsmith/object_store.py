"""A storage root on S3 (``s3a://bucket/prefix``): paths the rest of streamsmith uses as
local ones.

Spark reaches the lake through Hadoop's S3A connector (``hadoop-aws``, pinned in
``streamsmith.spark.stack``) and is handed ``str(path)``; what streamsmith itself reads
and writes beside Spark (schema versions, a table's saved schema, which folders are
tables, Delta logs for the read side) goes through pyarrow's S3 filesystem. So a lake
path stays a :class:`pathlib.Path`: :class:`ObjectPath` keeps the URL in ``str()`` and
answers ``stat``, ``iterdir``, ``glob``, reads and writes from the object store, and
every caller that joins, names or tests paths works unchanged.

What cannot live on an object store stays on local disk, in :func:`local_side`: the
event log and the status cache (appended to, line by line), the embedded services'
homes and Spark's warehouse.

The endpoint, credentials and addressing come from the spec's ``spark.conf``
(``spark.hadoop.fs.s3a.*``), else from the AWS SDK's standard environment variables
(:data:`ENV_KEYS`); :func:`s3a_conf` hands the same settings to Spark.
"""

from __future__ import annotations

import errno
import fnmatch
import io
import os
import stat
from collections.abc import Generator, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path, PosixPath
from typing import IO, Any
from urllib.parse import urlsplit

from streamsmith.errors import UserError

SCHEME = "s3a"
_PREFIX = f"{SCHEME}://"
_S3A = "spark.hadoop.fs.s3a."
# S3A's key (below spark.hadoop.fs.s3a.) <- the environment variables read when the spec's
# spark.conf does not set it, first one set wins.
ENV_KEYS: dict[str, tuple[str, ...]] = {
    "endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "endpoint.region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "access.key": ("AWS_ACCESS_KEY_ID",),
    "secret.key": ("AWS_SECRET_ACCESS_KEY",),
    "session.token": ("AWS_SESSION_TOKEN",),
}
PATH_STYLE = "path.style.access"
DEFAULT_REGION = "us-east-1"
_STATE_ENV = "XDG_STATE_HOME"

# Each bucket's settings, registered by the root that named it (a process runs one spec):
# a path joined under a root is a new object and finds them by its bucket.
_SETTINGS: dict[str, tuple[tuple[str, str], ...]] = {}


def is_object_url(root: str) -> bool:
    """Whether a storage root names an object store rather than a folder."""
    return "://" in root


def object_root(url: str, conf: Mapping[str, object] | None = None) -> ObjectPath:
    """The storage root ``url`` (``s3a://bucket/prefix``), its bucket's settings taken
    from ``conf`` (a spec's ``spark.conf``) and the environment."""
    parts = urlsplit(url)
    if parts.scheme != SCHEME or not parts.netloc:
        raise UserError(
            f"storage root {url!r}: only S3 through Hadoop's S3A connector is supported, "
            f"as {SCHEME}://bucket/prefix"
        )
    _SETTINGS[parts.netloc] = tuple(sorted(s3a_settings(conf or {}).items()))
    return ObjectPath(f"{SCHEME}:/{parts.netloc}{parts.path}".rstrip("/"))


def s3a_settings(conf: Mapping[str, object]) -> dict[str, str]:
    """S3A's settings (keys below ``fs.s3a.``): the spec's ``spark.hadoop.fs.s3a.*``, else
    the environment's. Path-style addressing is on when an endpoint is named and the conf
    does not say otherwise (servers other than AWS's, MinIO, Ceph, moto, seldom resolve
    ``bucket.host`` names), and the region is ``us-east-1`` unless one is given."""
    settings = {k[len(_S3A) :]: str(v) for k, v in conf.items() if k.startswith(_S3A)}
    for key, names in ENV_KEYS.items():
        found = next((os.environ[n] for n in names if os.environ.get(n)), None)
        if key not in settings and found:
            settings[key] = found
    if "endpoint" in settings:
        settings.setdefault(PATH_STYLE, "true")
        # else the SDK asks the EC2 metadata service, and waits for its timeouts off EC2
        settings.setdefault("endpoint.region", DEFAULT_REGION)
    return settings


def s3a_conf(conf: Mapping[str, object]) -> dict[str, str]:
    """The ``spark.hadoop.fs.s3a.*`` conf a session needs for the settings of
    :func:`s3a_settings` (those the spec sets and those the environment gives)."""
    return {f"{_S3A}{key}": value for key, value in s3a_settings(conf).items()}


def storage_options(path: Path) -> dict[str, str] | None:
    """The same settings for delta-rs (``deltalake``'s ``storage_options``); None for a
    local path."""
    if not isinstance(path, ObjectPath):
        return None
    settings = dict(_SETTINGS.get(path.bucket, ()))
    options = {"AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    for key, name in (
        ("endpoint", "AWS_ENDPOINT_URL"),
        ("endpoint.region", "AWS_REGION"),
        ("access.key", "AWS_ACCESS_KEY_ID"),
        ("secret.key", "AWS_SECRET_ACCESS_KEY"),
        ("session.token", "AWS_SESSION_TOKEN"),
    ):
        if key in settings:
            options[name] = settings[key]
    if settings.get(PATH_STYLE, "false").lower() == "true":
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    options.setdefault("AWS_REGION", DEFAULT_REGION)
    return options


def local_side(root: Path) -> Path:
    """Where the parts that need a local disk live for ``root``: the root itself, or for
    a root on S3 ``$XDG_STATE_HOME/streamsmith/s3a/<bucket>/<prefix>`` (else under
    ``~/.local/state``): the event log, the status cache, the embedded services' homes."""
    if not isinstance(root, ObjectPath):
        return root
    base = Path(os.environ.get(_STATE_ENV) or Path.home() / ".local" / "state")
    return base / "streamsmith" / SCHEME / root.key


def local_only(path: Path, what: str) -> Path:
    """``path``, when on local disk; else a UserError: ``what`` writes files with local
    renames (generated inputs and lookup tables, trained models, demos)."""
    shown = str(path)
    if isinstance(path, ObjectPath) or shown.startswith(f"{SCHEME}:"):
        url = shown if shown.startswith(_PREFIX) else _PREFIX + shown[len(SCHEME) + 2 :]
        raise UserError(f"{what} writes to local disk, and {url} is on S3: give a local folder")
    return path


def remove_tree(path: Path) -> None:
    """Delete a folder and all below it, on local disk or under an S3 prefix."""
    if isinstance(path, ObjectPath):
        with path._reaching("delete"):
            path.filesystem.delete_dir(path.key)
        return
    import shutil

    shutil.rmtree(path)


class ObjectPath(PosixPath):
    """A path under an ``s3a://`` root: joined and named like any path, ``str()`` is the URL
    Spark is handed, file operations go to the object store. Object stores have no
    folders: a prefix is a folder once an object lies below it, and ``mkdir`` makes none."""

    def __str__(self) -> str:
        text = super().__str__()
        return _PREFIX + text[len(SCHEME) + 2 :]

    def __fspath__(self) -> str:
        return str(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (object_path, (str(self),))

    @property
    def bucket(self) -> str:
        return self.parts[1]

    @property
    def key(self) -> str:
        """The object key (``bucket/prefix/...``, as pyarrow names it)."""
        return "/".join(self.parts[1:])

    @property
    def filesystem(self) -> Any:
        return _filesystem(self.bucket, _SETTINGS.get(self.bucket, ()))

    def is_absolute(self) -> bool:
        return True

    def resolve(self, strict: bool = False) -> ObjectPath:
        return self

    def absolute(self) -> ObjectPath:
        return self

    def expanduser(self) -> ObjectPath:
        return self

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        from pyarrow import fs

        with self._reaching("read"):
            info = self.filesystem.get_file_info(self.key)
        if info.type == fs.FileType.NotFound:
            raise FileNotFoundError(errno.ENOENT, "no such object or prefix", str(self))
        directory = info.type == fs.FileType.Directory
        mode = (stat.S_IFDIR | 0o755) if directory else (stat.S_IFREG | 0o644)
        nanos = info.mtime_ns or 0
        size = 0 if directory else int(info.size or 0)
        seconds = int(nanos // 1_000_000_000)
        times = {f"st_{kind}time{unit}": value for kind in ("a", "m", "c")
                 for unit, value in (("", nanos / 1e9), ("_ns", nanos))}  # fmt: skip
        return os.stat_result((mode, 0, 0, 1, 0, 0, size, seconds, seconds, seconds), times)

    def iterdir(self) -> Generator[ObjectPath, None, None]:
        for info in self._listing(recursive=False):
            yield self / info.base_name

    def glob(self, pattern: str) -> Iterator[ObjectPath]:  # type: ignore[override]
        wanted = pattern.split("/")
        deep = len(wanted) > 1
        for info in self._listing(recursive=deep):
            relative = info.path[len(self.key) + 1 :].split("/")
            if len(relative) == len(wanted) and all(
                fnmatch.fnmatchcase(part, want) for part, want in zip(relative, wanted, strict=True)
            ):
                yield self / "/".join(relative)

    def rglob(self, pattern: str) -> Iterator[ObjectPath]:  # type: ignore[override]
        for info in self._listing(recursive=True):
            if fnmatch.fnmatchcase(info.base_name, pattern):
                yield self / info.path[len(self.key) + 1 :]

    def _listing(self, *, recursive: bool) -> list[Any]:
        from pyarrow import fs

        selector = fs.FileSelector(self.key, allow_not_found=True, recursive=recursive)
        with self._reaching("list"):
            return list(self.filesystem.get_file_info(selector))

    @contextmanager
    def _reaching(self, action: str) -> Iterator[None]:
        """pyarrow's errors of S3 (unreachable, denied, no such bucket) as one line that
        names the path; a missing object stays FileNotFoundError."""
        try:
            yield
        except FileNotFoundError:
            raise
        except OSError as exc:
            reason = " ".join(str(exc).split())
            raise UserError(f"cannot {action} {self} on S3: {reason}") from None

    def open(  # type: ignore[override]
        self,
        mode: str = "r",
        buffering: int = -1,
        encoding: str | None = None,
        errors: str | None = None,
        newline: str | None = None,
    ) -> IO[Any]:
        if mode not in ("r", "rb"):
            raise UserError(
                f"{self}: streamsmith opens files on an object store for reading only "
                f"(asked for mode {mode!r})"
            )
        data = io.BytesIO(self.read_bytes())
        if mode == "rb":
            return data
        return io.TextIOWrapper(data, encoding=encoding or "utf-8", errors=errors, newline=newline)

    def read_bytes(self) -> bytes:
        with self._reaching("read"), self.filesystem.open_input_stream(self.key) as stream:
            return bytes(stream.read())

    def read_text(self, encoding: str | None = None, errors: str | None = None) -> str:
        return self.read_bytes().decode(encoding or "utf-8", errors or "strict")

    def write_bytes(self, data: Any) -> int:
        with self._reaching("write"), self.filesystem.open_output_stream(self.key) as stream:
            stream.write(bytes(data))
        return len(data)

    def write_text(
        self,
        data: str,
        encoding: str | None = None,
        errors: str | None = None,
        newline: str | None = None,
    ) -> int:
        return self.write_bytes(data.encode(encoding or "utf-8", errors or "strict"))

    def touch(self, mode: int = 0o666, exist_ok: bool = True) -> None:
        if not (exist_ok and self.exists()):
            self.write_bytes(b"")

    def mkdir(self, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        return None

    def rmdir(self) -> None:
        return None

    def unlink(self, missing_ok: bool = False) -> None:
        if missing_ok and not self.exists():
            return
        with self._reaching("delete"):
            self.filesystem.delete_file(self.key)

    def replace(self, target: str | os.PathLike[str]) -> ObjectPath:
        """A copy then a delete: S3 has no rename, so this is not atomic. streamsmith uses
        it for files it alone writes (a schema beside its table)."""
        destination = target if isinstance(target, ObjectPath) else object_path(str(target))
        with self._reaching("move"):
            self.filesystem.move(self.key, destination.key)
        return destination

    rename = replace


def object_path(url: str) -> ObjectPath:
    """The path of an object URL (``s3a://`` or ``s3://``) under a registered root."""
    parts = urlsplit(url)
    return ObjectPath(f"{SCHEME}:/{parts.netloc}{parts.path}")


@cache
def _filesystem(bucket: str, settings: tuple[tuple[str, str], ...]) -> Any:
    """pyarrow's S3 filesystem for ``bucket``'s S3A settings."""
    from pyarrow import fs

    given = dict(settings)
    options: dict[str, Any] = {
        "access_key": given.get("access.key"),
        "secret_key": given.get("secret.key"),
        "session_token": given.get("session.token"),
        "region": given.get("endpoint.region") or DEFAULT_REGION,
        "force_virtual_addressing": given.get(PATH_STYLE, "false").lower() != "true",
    }
    endpoint = given.get("endpoint")
    if endpoint:
        split = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["endpoint_override"] = split.netloc
        options["scheme"] = split.scheme
    try:
        return fs.S3FileSystem(**{k: v for k, v in options.items() if v is not None})
    except (ValueError, OSError) as exc:
        raise UserError(f"bucket {bucket}: S3 settings rejected: {exc}") from exc
