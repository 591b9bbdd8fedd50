"""The jars of ``streamsmith.spark.stack``, resolved once into a folder of streamsmith's.

``fetch()`` (``streamsmith jvm fetch``, run by ``make setup``) asks Maven for each group's
artifacts with their runtime dependencies and copies them to
``<cache>/jars/<digest of the version set>/<group>/``, writing a manifest with each jar's
SHA-256 last. Every later start reads that folder and nothing else: a Spark session puts
the ``spark`` group on its classpath (``session_conf``), the broker runs on the
``kafka`` group. A changed version set has another digest, so it is resolved afresh and
never mixed with the old one.

One group is built here rather than fetched: ``streamsmith`` (:data:`OWN`), compiled by
``javac`` from the Java sources in ``streamsmith/spark/java`` against the wheel's jars
(the JDBC server's password check, ``streamsmith.spark.auth``, and the line reader that
numbers each line of a file source, ``io.files``). Their
digest is part of the folder's name, so a changed source is compiled afresh.

Jars the pyspark wheel already ships (Spark itself, Hadoop's client, Scala, Jackson, ...)
are left out of the ``spark`` group: two versions of one library on a classpath fail in
ways that name neither.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from importlib import resources
from pathlib import Path
from xml.sax.saxutils import escape

from streamsmith.errors import UserError
from streamsmith.spark import stack

MANIFEST = "manifest.json"
JARS_ENV = "STREAMSMITH_JARS"  # another folder of resolved groups (an image, a shared disk)
CACHE_ENV = "STREAMSMITH_CACHE"
OWN = "streamsmith"  # the group compiled from streamsmith's own Java sources


def cache_dir() -> Path:
    """Where streamsmith keeps machine-local caches: ``$STREAMSMITH_CACHE``, else
    ``$XDG_CACHE_HOME/streamsmith``, else ``~/.cache/streamsmith``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streamsmith"


def spark_jars() -> Path:
    """The jars folder of the Spark the driver runs (``$SPARK_HOME`` or the pyspark wheel)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    import pyspark  # the wheel's own Spark distribution

    return Path(pyspark.__file__).parent / "jars"


def stack_digest() -> str:
    """A digest of every pinned artifact: the name of the version set's folder."""
    names = [
        f"{g}={a.coordinates()}{''.join(f' -{name}' for name in a.excludes)}"
        for g, group in stack.GROUPS.items()
        for a in group
    ]
    names += [f"{OWN}={name}:{hashlib.sha256(text).hexdigest()}" for name, text in _java_sources()]
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:12]


def home() -> Path:
    """Where the resolved groups live: ``$STREAMSMITH_JARS``, else the cache's
    ``jars/<digest>``."""
    if os.environ.get(JARS_ENV):
        return Path(os.environ[JARS_ENV])
    return cache_dir() / "jars" / stack_digest()


def group_jars(group: str, root: Path | None = None) -> list[Path]:
    """The resolved jars of ``group`` (sorted), or an error that says how to get them."""
    folder = (root or home()) / group
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise UserError(
            f"the {group} jars of {stack.describe()} are not installed in {folder}: "
            "run `streamsmith jvm fetch` (make setup does) while Maven Central is reachable"
        )
    names: list[str] = json.loads(manifest.read_text(encoding="utf-8"))["jars"]
    return [folder / name for name in sorted(names)]


def installed(group: str, root: Path | None = None) -> bool:
    return ((root or home()) / group / MANIFEST).is_file()


def driver_jars() -> list[Path]:
    """What a driver adds to its classpath: the ``spark`` group and streamsmith's own."""
    return group_jars("spark") + group_jars(OWN)


def session_conf() -> dict[str, str]:
    """The conf that puts the ``spark`` group on a session: the driver's classpath (so the
    class-data-sharing archive covers it, and a ``local`` master's executors, which live in
    the driver, see it) and ``spark.jars`` (so a cluster's executors get it, with
    streamsmith's own jar: its line reader runs in their tasks)."""
    jars = [str(path) for path in driver_jars()]
    return {
        "spark.driver.extraClassPath": ":".join(jars),
        "spark.jars": ",".join(jars),
    }


def fetch(root: Path | None = None, *, force: bool = False) -> dict[str, list[Path]]:
    """Resolve every group not yet installed under ``root`` (Maven, ``mvn`` on PATH);
    returns each group's jars."""
    root = root or home()
    resolved: dict[str, list[Path]] = {}
    for group, artifacts in stack.GROUPS.items():
        if force or not installed(group, root):
            exclude = _wheel_jar_names() if group == "spark" else set()
            _resolve(artifacts, root / group, exclude)
        resolved[group] = group_jars(group, root)
    if force or not installed(OWN, root):
        _compile_own(root / OWN)
    resolved[OWN] = group_jars(OWN, root)
    return resolved


def _java_sources() -> list[tuple[str, bytes]]:
    folder = resources.files("streamsmith.spark").joinpath("java")
    found = [entry for entry in folder.iterdir() if entry.name.endswith(".java")]
    return sorted((entry.name, entry.read_bytes()) for entry in found)


def _compile_own(folder: Path) -> None:
    """Compile streamsmith's Java sources against the wheel's jars into one jar."""
    javac = shutil.which("javac")
    if javac is None:
        raise UserError(
            "the Java compiler (`javac`) is needed once to build streamsmith's jar: "
            "apt-get install openjdk-17-jdk-headless (make setup does)"
        )
    staging = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="streamsmith-javac-") as work:
        sources = []
        for name, text in _java_sources():
            (Path(work) / name).write_bytes(text)
            sources.append(str(Path(work) / name))
        classes = Path(work) / "classes"
        command = [
            javac, "--release", "17", "-nowarn", "-cp", f"{spark_jars()}/*",
            "-d", str(classes), *sources,
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise UserError(f"javac could not compile streamsmith's Java sources:\n{result.stderr}")
        jar = staging / f"{OWN}.jar"
        with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as out:
            for compiled in sorted(classes.rglob("*.class")):
                out.write(compiled, compiled.relative_to(classes).as_posix())
    _finish_group(staging, folder, [], {jar.name: hashlib.sha256(jar.read_bytes()).hexdigest()})


def _resolve(artifacts: tuple[stack.Artifact, ...], folder: Path, exclude: set[str]) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise UserError("Maven (`mvn`) is needed once to fetch the jars: apt-get install maven")
    staging = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="streamsmith-pom-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_pom(artifacts), encoding="utf-8")
        command = [
            mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError(
            f"Maven could not resolve {', '.join(a.coordinates() for a in artifacts)}:\n"
            f"{(result.stdout + result.stderr)[-3000:]}"
        )
    kept: dict[str, str] = {}
    for jar in sorted(staging.glob("*.jar")):
        if _base_name(jar.name) in exclude:
            jar.unlink()
        else:
            kept[jar.name] = hashlib.sha256(jar.read_bytes()).hexdigest()
    _finish_group(staging, folder, [a.coordinates() for a in artifacts], kept)


def _finish_group(staging: Path, folder: Path, artifacts: list[str], jars: dict[str, str]) -> None:
    """Write the manifest (each jar's SHA-256) last, then move the group into place."""
    manifest = {"artifacts": artifacts, "jars": sorted(jars), "sha256": jars}
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging.replace(folder)


def _pom(artifacts: tuple[stack.Artifact, ...]) -> str:
    dependencies = "".join(
        f"<dependency><groupId>{escape(a.group)}</groupId><artifactId>{escape(a.name)}"
        f"</artifactId><version>{escape(a.version)}</version>{_exclusions(a)}</dependency>"
        for a in artifacts
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>streamsmith</groupId><artifactId>jars</artifactId><version>0</version>"
        "<packaging>pom</packaging>"
        f"<dependencies>{dependencies}</dependencies></project>"
    )


def _exclusions(artifact: stack.Artifact) -> str:
    if not artifact.excludes:
        return ""
    parts = (name.split(":", 1) for name in artifact.excludes)
    return (
        "<exclusions>"
        + "".join(
            f"<exclusion><groupId>{escape(group)}</groupId><artifactId>{escape(name)}"
            "</artifactId></exclusion>"
            for group, name in parts
        )
        + "</exclusions>"
    )


_VERSION_SUFFIX = re.compile(r"-\d[\w.\-]*\.jar$")


def _base_name(jar: str) -> str:
    """``kafka-clients-4.1.0.jar`` -> ``kafka-clients``."""
    return _VERSION_SUFFIX.sub("", jar)


def _wheel_jar_names() -> set[str]:
    return {_base_name(jar.name) for jar in spark_jars().glob("*.jar")}
