# Shared by every pytest suite under tests/ (pytest loads the conftest.py of each parent folder).
#
# The suites write multi-GB test models under tmp_path / tmp_path_factory. pytest keeps the folders
# of its last three sessions, and CTest starts one session per suite, so a run of `make test` would
# leave gigabytes in $TMPDIR/pytest-of-$USER. A session that passes removes its own folder; a failed
# one keeps it for inspection (what pytest >= 7.3 calls tmp_path_retention_policy = "failed"; Debian
# 12 has pytest 7.2).
import pathlib
import shutil


def pytest_sessionfinish(session, exitstatus):
    factory = getattr(session.config, "_tmp_path_factory", None)
    basetemp = getattr(factory, "_basetemp", None)
    if exitstatus == 0 and basetemp is not None:
        shutil.rmtree(basetemp, ignore_errors=True)
        current = pathlib.Path(basetemp).parent / "pytest-current"  # pytest's link to the newest
        if current.is_symlink() and current.resolve() == pathlib.Path(basetemp).resolve():
            current.unlink()
