import sys
import pathlib

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).parent))


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles from scratch: dynamo's caches hold graphs compiled by earlier tests."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()
