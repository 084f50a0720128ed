import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance with 2 CPUs for the module's tests (one already attached is reused and left running)."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests on the two-node Ray cluster (the ``cluster`` fixture) run first: a process that has run a
    local Ray instance cannot join another cluster afterwards (Ray keeps per-process state, and the
    cluster's workers fail with OwnerDiedError), whatever order the files are collected in."""
    items.sort(key=lambda item: "cluster" not in getattr(item, "fixturenames", ()))
