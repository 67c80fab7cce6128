import json
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("KILN_BUILD_DIR", ROOT / "build"))


@pytest.fixture(scope="session")
def build_dir():
    return BUILD


@pytest.fixture(scope="session")
def kiln_cli():
    path = BUILD / "kiln"
    assert path.exists(), f"{path} not built; run `make build`"
    return str(path)


@pytest.fixture(scope="session")
def models():
    with open(BUILD / "models" / "models.json") as f:
        return json.load(f)
