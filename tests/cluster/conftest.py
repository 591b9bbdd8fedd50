"""The Kafka test runs in every suite; the files test only with ``make test-cluster``
(``pytest -m cluster``): each costs about a minute, and the suite's time is budgeted."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "cluster" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="cluster test left to `make test-cluster`")
    for item in items:
        if item.get_closest_marker("cluster_only") is not None:
            item.add_marker(skip)
