"""attnlib.queue when it is killed (issue 33): SIGHUP stops it as SIGTERM does, its runs never outlive it
(even after SIGKILL: they get one SIGTERM, save and exit), and an immediate rerun resumes a run still
ending instead of reporting "failed (exit 3)"."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from attnlib.lab import queue
from attnlib.lab.queue import Job, Queue

# A run as `train` behaves: on SIGTERM it "saves a checkpoint" (writes a file) and exits 130.
RUN = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from attnlib.lab.queue import die_with_parent
    out = Path(sys.argv[1])
    def term(*a):
        (out / "checkpoint").write_text(str(os.getpid()))
        sys.exit(130)
    signal.signal(signal.SIGTERM, term)
    die_with_parent()
    (out / "started").write_text(str(os.getpid()))
    time.sleep(120)
    """
)

QUEUE = textwrap.dedent(
    """
    import sys
    from attnlib.lab.queue import Job, Queue
    out = sys.argv[1]
    q = Queue([Job("a", 0)], 1, lambda job: [sys.executable, "-c", sys.argv[2], out], out)
    outcomes = q.run()
    print("interrupted" if q.interrupted else "done", outcomes[0].status, flush=True)
    """
)


def _start_queue(tmp_path: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", QUEUE, str(tmp_path), RUN], stdout=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    started = tmp_path / "started"  # the run creates it, then writes its pid: wait for both
    while not (started.exists() and started.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None, "the run never started"
        time.sleep(0.1)
    return proc


def _gone(pid: int, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_run_does_not_outlive_a_killed_queue(tmp_path):
    proc = _start_queue(tmp_path)
    run_pid = int((tmp_path / "started").read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _gone(run_pid), "the run outlived its queue"
    assert (tmp_path / "checkpoint").read_text() == str(run_pid)  # it saved on the SIGTERM it was sent


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_sighup_stops_the_queue_as_sigterm_does(tmp_path, signum):
    proc = _start_queue(tmp_path)
    run_pid = int((tmp_path / "started").read_text())
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=60)
    assert out.splitlines()[-1] == "interrupted stopped", out
    assert (tmp_path / "checkpoint").read_text() == str(run_pid) and _gone(run_pid)


def test_a_run_locked_by_one_still_ending_is_retried_not_failed(tmp_path, monkeypatch):
    """The first attempt finds the folder locked (as `train` says it, exit 3); the retry trains."""
    monkeypatch.setattr(queue, "LOCK_WAIT", 0.1)
    marker = tmp_path / "tried"
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        marker = Path({str(marker)!r})
        if not marker.exists():
            marker.write_text("1")
            print("python -m attnlib: refused: r/a is being trained by another process (pid 1 on vm)")
            sys.exit(3)
        print("trained")
        """
    )
    outcomes = Queue([Job("a", 0)], 1, lambda job: [sys.executable, "-c", script], tmp_path).run()
    assert outcomes[0].status == "trained"
    assert (tmp_path / "a-seed0.log").read_text().splitlines()[-1] == "trained"


def test_a_run_locked_for_good_is_skipped_after_the_retries(tmp_path, monkeypatch):
    monkeypatch.setattr(queue, "LOCK_WAIT", 0.01)
    monkeypatch.setattr(queue, "LOCK_RETRIES", 3)
    script = "import sys; print('refused: x is being trained by another process'); sys.exit(3)"
    outcomes = Queue([Job("a", 0)], 1, lambda job: [sys.executable, "-c", script], tmp_path).run()
    assert outcomes[0].status == "skipped: another process trains it"  # not "failed": nothing went wrong
    assert (tmp_path / "a-seed0.log").read_text().count("being trained by another process") == 4


def test_die_with_parent_outside_a_queue_does_nothing(monkeypatch):
    monkeypatch.delenv(queue.PARENT_ENV, raising=False)
    queue.die_with_parent()  # no signal, no error
