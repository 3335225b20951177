"""Issue 40: fuzzing every verb with damaged folders (Hypothesis): beside an untouched real trace,
a folder holds what a careful user's disk may -- broken and looping symbolic links, a FIFO, links to
/dev/null, /dev/zero and /proc/self/mem named like traces, an empty file, a file without read
permission and a subfolder without it (chmod 000), folders named like traces, a run.json that is a
FIFO or a broken link, a link to a folder, damaged copies of real traces (tests/fuzzing.py's
damages) -- and a verb runs on it in-process (tests/fuzz_verbs.py).

Property (tests/fuzz_verbs.py's ``check`` and ``check_kept``): no hang (a FIFO is never opened), no
traceback, no internal error, an exit code the README documents for the verb; and analyze (its
figures those it has alone), --critical-path, compare and bench --report-only report the untouched
trace: one file's failure never loses the rest.

chmod 000 does not stop root, and the tests may run as root (CI's containers do): there, opening or
listing what was chmod-ed raises PermissionError as it would for another user (``refused``), and
``test_chmod_000_for_real`` skips, saying so.
"""

import builtins
import os
import random
import tempfile
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner
from fuzz_verbs import VERBS, bench_suite, check, check_kept, run_verb
from fuzzing import UNTOUCHED, corpus, damage, damaged_bytes, fuzz_settings
from hypothesis import example, given
from hypothesis import strategies as st
from owndata import DATA

from tracekit.cli import main
from tracekit.errors import ExitCode

ENTRIES = ["broken link", "loop link", "fifo", "refused file", "folder like a trace", "empty file", "dev null link",
           "dev zero link", "proc mem link", "run.json fifo", "run.json broken link", "unlistable folder",
           "link to folder", "damaged copy"]
ROOT = os.geteuid() == 0


@contextmanager
def refused(files: set[str], folders: set[str]):
    """Under root, ``open`` of ``files`` and listing ``folders`` (chmod 000 already) raise
    PermissionError, as they do for any other user; elsewhere chmod does it, and nothing is patched."""
    if not ROOT:
        yield
        return
    real_open, real_scandir, real_listdir = builtins.open, os.scandir, os.listdir

    def denied(path):
        return isinstance(path, (str, os.PathLike)) and os.path.abspath(path) in files | folders

    def guarded_open(file, *args, **kwargs):
        if denied(file):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    def guarded(real):
        def listing(path="."):
            if denied(path):
                raise PermissionError(13, "Permission denied", str(path))
            return real(path)
        return listing
    with mock.patch("builtins.open", guarded_open), mock.patch("os.scandir", guarded(real_scandir)), \
            mock.patch("os.listdir", guarded(real_listdir)):
        yield


def _make(folder: Path, entry: str, i: int, raw: bytes, files: set, folders: set) -> None:
    """Put one kind of entry (``ENTRIES``) in ``folder``, named like a trace (``i``: its number)."""
    name = folder / f"e{i}.pt.trace.json"
    if entry == "broken link":
        name.symlink_to(folder / "nowhere" / "x.pt.trace.json")
    elif entry == "loop link":
        name.symlink_to(folder / f"e{i}b.pt.trace.json")
        (folder / f"e{i}b.pt.trace.json").symlink_to(name)
    elif entry == "fifo":
        os.mkfifo(name)
    elif entry == "refused file":
        name.write_bytes(UNTOUCHED.read_bytes())
        name.chmod(0)
        files.add(str(name.absolute()))
    elif entry == "folder like a trace":
        name.mkdir()
        (name / "inner.pt.trace.json.gz").write_bytes(raw)
    elif entry == "empty file":
        name.write_bytes(b"")
    elif entry.startswith(("dev", "proc")):
        name.symlink_to({"dev null link": "/dev/null", "dev zero link": "/dev/zero",
                         "proc mem link": "/proc/self/mem"}[entry])
    elif entry.startswith("run.json"):
        run = folder / f"run{i}"
        run.mkdir()
        (run / "w.pt.trace.json.gz").write_bytes(raw)
        os.mkfifo(run / "run.json") if entry == "run.json fifo" else (run / "run.json").symlink_to(run / "gone")
    elif entry == "unlistable folder":
        locked = folder / f"locked{i}"
        locked.mkdir()
        (locked / "hidden.pt.trace.json.gz").write_bytes(raw)
        locked.chmod(0)
        folders.add(str(locked.absolute()))
    elif entry == "link to folder":
        name.symlink_to(folder)
    else:
        name.with_suffix(".json.gz").write_bytes(raw)   # e{i}.pt.trace.json.gz: a damaged copy


def _restore(paths: set[str]) -> None:
    """Give back what was chmod-ed, so the temporary folder can be removed."""
    for p in paths:
        os.chmod(p, 0o755)


def _damaged_folder(verb, entries, source, start, damages, rnd) -> None:
    raw = damaged_bytes(source, (start, 0.1), damages, True, None, rnd or random.Random(0))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        suite = None
        if verb == "bench":   # the entries are the reduce-overhead cell's, the untouched trace eager's
            suite, eager, folder = bench_suite(tmp)
            (eager / UNTOUCHED.name).write_bytes(UNTOUCHED.read_bytes())
        else:
            folder = tmp / "traces"
            folder.mkdir()
            (folder / UNTOUCHED.name).write_bytes(UNTOUCHED.read_bytes())
        files, folders = set(), set()
        try:
            for i, entry in enumerate(entries):
                _make(folder, entry, i, raw, files, folders)
            with refused(files, folders):
                r = run_verb(verb, folder, tmp, suite=suite)
            where = f"a folder of {entries} (the damaged copy: {source} from {start:.2f}, {damages})"
            check(verb, r, where)
            check_kept(verb, r, tmp, where)
        finally:
            _restore(files | folders)


FOLDER = dict(verb=st.sampled_from(sorted(VERBS)), entries=st.lists(st.sampled_from(ENTRIES), min_size=1, max_size=5),
              source=st.sampled_from(corpus()), start=st.floats(0, 1), damages=st.lists(damage, max_size=2),
              rnd=st.randoms(use_true_random=False))


def _issue(test):
    """The issue's folders, run first every time: a broken link beside a good trace (analyze and
    compare: exit 70, the good trace lost, before), a FIFO and a broken link given to whatif (exit 70
    before), every kind of entry at once through analyze; and what the fuzzing found: whatif of a
    folder where one trace (a stretch of our reduce-overhead ViT) has GPU ops and no launch call
    (taken as a rank of a job: an IndexError building its graph, exit 13, before)."""
    for verb, entries in [("analyze", ["broken link"]), ("compare", ["broken link"]),
                          ("whatif", ["fifo", "broken link"]), ("analyze", ENTRIES)]:
        test = example(verb=verb, entries=entries, source=UNTOUCHED, start=0.0, damages=[], rnd=None)(test)
    graphs = next((DATA / "h100" / "vit-study" / "vit16x6x384" / "reduce-overhead").glob("*.pt.trace.json.gz"))
    return example(verb="whatif", entries=["damaged copy"], source=graphs, start=0.5, damages=[], rnd=None)(test)


@fuzz_settings(0.06)
@given(**FOLDER)
@_issue
def test_damaged_folders_quick(verb, entries, source, start, damages, rnd):
    """A few damaged folders through every verb, and the issue's: the fast suite's share."""
    _damaged_folder(verb, entries, source, start, damages, rnd)


@pytest.mark.slow
@fuzz_settings(0.4)
@given(**FOLDER)
def test_damaged_folders(verb, entries, source, start, damages, rnd):
    """Many damaged folders through every verb (0.4 of ``TRACEKIT_FUZZ_EXAMPLES``)."""
    _damaged_folder(verb, entries, source, start, damages, rnd)


@pytest.mark.skipif(ROOT, reason="runs as root, whom chmod 000 does not stop reading: the fuzz tests "
                                 "emulate it there (a refused open or listing)")
def test_chmod_000_for_real(tmp_path):
    """A file and a subfolder chmod 000 beside a good trace: analyze reports the good trace and
    both of them with their reason (exit 10); the file given alone is exit 3."""
    folder = tmp_path / "traces"
    (folder / "locked").mkdir(parents=True)
    (folder / UNTOUCHED.name).write_bytes(UNTOUCHED.read_bytes())
    (folder / "refused.pt.trace.json.gz").write_bytes(UNTOUCHED.read_bytes())
    (folder / "locked" / "hidden.pt.trace.json.gz").write_bytes(UNTOUCHED.read_bytes())
    (folder / "refused.pt.trace.json.gz").chmod(0)
    (folder / "locked").chmod(0)
    try:
        r = CliRunner().invoke(main, ["analyze", str(folder), "--out", str(tmp_path / "r")])
        assert r.exit_code == ExitCode.PARTIAL, r.output
        text = " ".join(r.output.split())
        assert "refused.pt.trace.json.gz: cannot be read (permission denied)" in text, r.output
        assert "locked: unreadable folder (permission denied)" in text and "integrity ok" in text, r.output
        r = CliRunner().invoke(main, ["whatif", str(folder / "refused.pt.trace.json.gz"), "--cuda-graphs"])
        assert r.exit_code == ExitCode.NOT_FOUND and "permission denied" in r.output, r.output
    finally:
        _restore({str(folder / "refused.pt.trace.json.gz"), str(folder / "locked")})
