"""pytest options shared by the test modules."""


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="Rewrite tests/cases/*/*.golden.json from the current output (review the diff).")
