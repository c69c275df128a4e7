import os

import pytest

# Keep the suite light on the 2-core machines it runs on: 2 threads, or 1 in each pytest-xdist worker (`make test`
# runs one per core), for the tests and the notebook kernels and other processes they start.
os.environ.setdefault("OMP_NUM_THREADS", "1" if os.environ.get("PYTEST_XDIST_WORKER") else "2")


@pytest.fixture(autouse=True)
def _torch_seed():
    try:
        import torch
    except ImportError:
        yield
        return
    torch.manual_seed(0)
    yield
