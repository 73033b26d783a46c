import os
import pathlib

import pytest


def shared_dir() -> pathlib.Path:
    """The shared/ directory beside the repository (or SESSIONLOG_SHARED_DIR)."""
    env = os.environ.get("SESSIONLOG_SHARED_DIR")
    if env:
        return pathlib.Path(env)
    return pathlib.Path(__file__).resolve().parents[2] / ".." / "shared"


@pytest.fixture
def store_path(tmp_path):
    """A store directory inside pytest's temporary directory (removed with it)."""
    return tmp_path / "store"


def segment_bytes_on_disk(store) -> int:
    """Bytes of the segment files of the store directory ``store``."""
    return sum(f.stat().st_size for f in pathlib.Path(store).iterdir() if f.name.endswith(".seg"))
