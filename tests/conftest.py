"""pytest options and fixtures shared by the test modules."""

import pytest

# Variables ckptlint reads (or that change its output) that a user's shell or a CI runner may have set:
# the tests expect none of them unless a test sets one itself. Removed from os.environ, so children the
# tests start do not see them either.
AMBIENT = ("COLUMNS", "NO_COLOR", "TERM", "CKPTLINT_JOBS", "HF_ENDPOINT", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
           "HF_HUB_DOWNLOAD_TIMEOUT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="Rewrite tests/cases/*/*.golden.json from the current output (review the diff).")


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch):
    for name in AMBIENT:
        monkeypatch.delenv(name, raising=False)
