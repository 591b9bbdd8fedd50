"""Host anomaly scores: k-means over per-host traffic windows, trained with Spark MLlib.

Each host's traffic in a window (see ``streamsmith.transforms.secops.host_windows``) is
four numbers: flows, bytes, distinct destinations and distinct ports. Training takes
their logarithms, standardises them and fits k-means (``pyspark.ml``) on the history in
the lake; a window's score is its distance to the nearest centre, and the threshold is
the largest training score times a margin. So the model learns what normal looks like
and flags what is far from all of it ("new threat patterns found in interactive
analysis … applied on real-time alerting").

The fitted pipeline is saved with MLlib (for inspection and batch use) and its few
numbers are written to ``current.json`` beside it, atomically. Scoring in the stream
reads that small file in the Python workers and reads it again whenever it changes, so
a retrained model is used from the next micro-batch on without stopping the stream.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

FEATURES = ("flows", "bytes", "destinations", "ports")
MODEL_NAME = "secops-anomaly"


@dataclass(frozen=True)
class AnomalyModel:
    """What scoring needs: the scaling, the centres and the threshold."""

    version: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    centers: tuple[tuple[float, ...], ...]
    threshold: float
    trained_on: int  # windows

    def scores(self, frame: pd.DataFrame) -> np.ndarray:
        """Distance of each row's scaled features to the nearest centre."""
        values = np.log1p(frame[list(self.features)].to_numpy(dtype="float64"))
        scaled = (values - np.asarray(self.mean)) / np.asarray(self.std)
        centers = np.asarray(self.centers)
        distances = np.linalg.norm(scaled[:, None, :] - centers[None, :, :], axis=2)
        return distances.min(axis=1)  # type: ignore[no-any-return]


def train(
    windows: DataFrame, k: int = 3, margin: float = 1.5, seed: int = 1
) -> tuple[AnomalyModel, object]:
    """Fit log-scaling and k-means on ``windows`` (one row per host and window); return
    the scoring parameters and the fitted MLlib pipeline."""
    from pyspark.ml import Pipeline
    from pyspark.ml.clustering import KMeans
    from pyspark.ml.feature import StandardScaler, VectorAssembler

    logged = windows.select(*(F.log1p(F.col(name).cast("double")).alias(name) for name in FEATURES))
    count = logged.count()
    if count < k:
        raise ValueError(f"{count} traffic windows to learn from; at least {k} are needed")
    pipeline = Pipeline(
        stages=[
            VectorAssembler(inputCols=list(FEATURES), outputCol="raw"),
            StandardScaler(inputCol="raw", outputCol="features", withMean=True, withStd=True),
            KMeans(k=k, seed=seed, featuresCol="features"),
        ]
    )
    fitted = pipeline.fit(logged)
    scaler, kmeans = fitted.stages[1], fitted.stages[2]
    std = tuple(s if s > 0 else 1.0 for s in scaler.std.toArray().tolist())  # type: ignore[attr-defined]
    model = AnomalyModel(
        version=datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ"),
        features=FEATURES,
        mean=tuple(scaler.mean.toArray().tolist()),  # type: ignore[attr-defined]
        std=std,
        centers=tuple(tuple(c.tolist()) for c in kmeans.clusterCenters()),  # type: ignore[attr-defined]
        threshold=0.0,
        trained_on=count,
    )
    training = model.scores(windows.select(*FEATURES).toPandas())
    threshold = float(training.max()) * margin if len(training) else math.inf
    return AnomalyModel(**{**asdict(model), "threshold": threshold}), fitted


def save(model: AnomalyModel, fitted: object, path: Path) -> Path:
    """Make ``model`` the current one at ``path`` (``streamsmith.io.lake.model_path``, which
    owns the lake's layout) and save its MLlib pipeline beside it, under ``<version>``."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    fitted.write().overwrite().save(str(folder / model.version))  # type: ignore[attr-defined]
    staging = folder / f".{path.name}.tmp"
    staging.write_text(json.dumps(asdict(model), indent=2), encoding="utf-8")
    staging.replace(path)
    return path


def load(path: Path) -> AnomalyModel:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return AnomalyModel(
        version=raw["version"],
        features=tuple(raw["features"]),
        mean=tuple(raw["mean"]),
        std=tuple(raw["std"]),
        centers=tuple(tuple(c) for c in raw["centers"]),
        threshold=float(raw["threshold"]),
        trained_on=int(raw["trained_on"]),
    )


class ModelCache:
    """The current model of a path, read again when the file changes (by mtime and
    size); None while there is no model yet."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._model: AnomalyModel | None = None

    def get(self) -> AnomalyModel | None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._model, self._stamp = load(Path(self.path)), stamp
        return self._model


_CACHES: dict[str, ModelCache] = {}


def current_model(path: str) -> AnomalyModel | None:
    """The model at ``path``, cached per Python worker process."""
    cache = _CACHES.setdefault(path, ModelCache(path))
    return cache.get()


def flagged(
    frame: pd.DataFrame, model: AnomalyModel | None
) -> tuple[pd.DataFrame, Sequence[float]]:
    """The rows scoring above the model's threshold, and their scores."""
    if model is None or frame.empty:
        return frame.iloc[0:0], []
    scores = model.scores(frame)
    keep = scores > model.threshold
    return frame[keep], scores[keep].tolist()
