import os

import pytest

# Keep the suite light on the 2-core machines it runs on.
os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture(autouse=True)
def _torch_seed():
    try:
        import torch
    except ImportError:
        yield
        return
    torch.manual_seed(0)
    yield
