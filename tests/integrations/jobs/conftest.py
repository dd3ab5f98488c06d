"""What the jobs room's Ray suites share: one local Ray instance per test module."""

from __future__ import annotations

from typing import Iterator

import pytest


@pytest.fixture(scope="module")
def local_ray(request: pytest.FixtureRequest) -> Iterator[None]:
    """A local two-CPU Ray instance for the test module that asks for it (``pytestmark =
    pytest.mark.usefixtures("local_ray")``), the module's own classes pickled by value into the workers; a module
    that sets ``RAY_LOG_TO_DRIVER = True`` sees the workers' output, as a user's own ``ray.init()`` does."""
    import ray  # (here: the room's other suites run without Ray)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=getattr(request.module, "RAY_LOG_TO_DRIVER", False),
             logging_level="ERROR")
    ray.cloudpickle.register_pickle_by_value(request.module)
    yield
    ray.shutdown()
