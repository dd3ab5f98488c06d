"""What the jobs room's Ray suites share: one local Ray instance per test module."""

from __future__ import annotations

import os
from typing import Iterator

import pytest

_NO_PROGRESS = "RAY_DATA_EXECUTION_NO_PROGRESS_TIMEOUT_S"


@pytest.fixture(scope="module")
def local_ray(request: pytest.FixtureRequest) -> Iterator[None]:
    """A local two-CPU Ray instance for the test module that asks for it (``pytestmark =
    pytest.mark.usefixtures("local_ray")``), the module's own classes pickled by value into the workers; a module
    that sets ``RAY_LOG_TO_DRIVER = True`` sees the workers' output, as a user's own ``ray.init()`` does. A run that
    stops moving fails after 5 minutes (Ray Data's own limit is 30), so a stuck pool fails its test, not the suite's
    time."""
    import ray  # (here: the room's other suites run without Ray)

    context = ray.data.DataContext.get_current()
    limit, child = context.execution_no_progress_timeout_s, os.environ.get(_NO_PROGRESS)
    context.execution_no_progress_timeout_s = 300
    os.environ[_NO_PROGRESS] = "300"  # (the suites' q2 commands in child processes)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=getattr(request.module, "RAY_LOG_TO_DRIVER", False),
             logging_level="ERROR")
    ray.cloudpickle.register_pickle_by_value(request.module)
    try:
        yield
    finally:
        context.execution_no_progress_timeout_s = limit
        if child is None:
            del os.environ[_NO_PROGRESS]
        else:
            os.environ[_NO_PROGRESS] = child
        ray.shutdown()
