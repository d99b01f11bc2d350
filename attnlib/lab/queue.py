"""Many trainings on one CPU machine: `python -m attnlib queue` runs experiments × seeds as N lanes of
single-thread `python -m attnlib train` processes side by side (the fastest way on a few cores: no threads
waiting for each other, see `attnlib.analysis.plan.grid_seconds`).

Each lane takes the next job of the list when its last one ends, so the list's order is the order of
priority. A job whose result is already complete is skipped; one cut off earlier resumes from its
checkpoints (that is `train`'s own behaviour). Each job's output goes to its own log file. On Ctrl-C or
SIGTERM the queue stops handing out jobs and sends SIGTERM to the running ones, which save a checkpoint
and exit: rerun the same command to go on.

    python -m attnlib queue --preset long --data ../shared/data/cifar10      # the ledger's runs
    python -m attnlib queue --preset budget --seeds 1 2 --experiments vit vit_ha
    python -m attnlib queue --preset budget --asked --data ../shared/data/cifar10  # seeds the comparisons lack
    python -m attnlib queue --preset budget --asked --dry-run                      # which ones, training none
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from attnlib.lab.exits import EXIT_LOCKED  # `train` refused: its folder is locked by another process
from attnlib.lab.machine import check_threads
from attnlib.results.store import check_no_links, open_nofollow


@dataclass(frozen=True)
class Job:
    experiment: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.experiment}@{self.seed}"


@dataclass
class Outcome:
    job: Job
    status: str  # "trained", "failed (exit N)", "skipped: another process trains it", "stopped", "not started"
    seconds: float = 0.0


def default_experiments(preset: str) -> list[str]:
    """What `queue` trains by default: at a preset of `attnlib.analysis.plan.PLANS` (`long`, `budget30`, `tokens16`)
    the runs the claims ledger needs from it, in their order, else the tables' grid (`experiments.names()`)."""
    from attnlib import experiments
    from attnlib.analysis.plan import PLANS

    return list(PLANS[preset]) if preset in PLANS else experiments.names()


def pending(jobs: Sequence[Job], preset: str, results_dir, data=None) -> tuple[list[Job], list[Job]]:
    """(to train, complete): the jobs without and with a complete result of their current configuration
    (ConfigError for bad experiments, seeds or data, before any job starts)."""
    from attnlib.data import check_data
    from attnlib.results.tables import collect

    check_data(data)

    complete = set()
    for seed in dict.fromkeys(job.seed for job in jobs):  # one look at the saved results per seed
        names = list(dict.fromkeys(job.experiment for job in jobs if job.seed == seed))
        frame = collect(results_dir, preset, names, seed=seed, data=data)
        complete |= {(n, seed) for n in frame.loc[frame["status"] == "complete", "experiment"]}
    done = [job for job in jobs if (job.experiment, job.seed) in complete]
    return [job for job in jobs if (job.experiment, job.seed) not in complete], done


def train_command(job: Job, preset: str, *, results_dir, data=None, force: bool = False) -> list[str]:
    """The `python -m attnlib train` command line of one job (one thread, no progress bars)."""
    argv = [sys.executable, "-m", "attnlib", "train", job.experiment, "--preset", preset]
    argv += ["--seed", str(job.seed), "--threads", "1", "--no-progress", "--results-dir", str(results_dir)]
    if data is not None:
        argv += ["--data", str(data)]
    return argv + (["--force"] if force else [])


class Queue:
    """Runs `jobs` in `lanes` lanes; `command(job)` gives each job's argv, its output goes to
    `log_dir/<experiment>-seed<seed>.log`. `run()` returns one `Outcome` per job, in the jobs' order."""

    def __init__(self, jobs: Sequence[Job], lanes: int, command: Callable[[Job], list[str]], log_dir):
        check_threads("lanes", lanes)
        self.jobs, self.lanes, self.command = list(jobs), lanes, command
        self.log_dir = Path(log_dir)
        self.outcomes = {job: Outcome(job, "not started") for job in self.jobs}
        self._next = iter(self.jobs)  # handed out in order, under the lock
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._running: dict[Job, subprocess.Popen] = {}

    def _take(self) -> Job | None:
        with self._lock:
            return None if self._stopping.is_set() else next(self._next, None)

    def _lane(self, lane: int) -> None:
        while (job := self._take()) is not None:
            log = self.log_dir / f"{job.experiment}-seed{job.seed}.log"
            start = time.monotonic()
            print(f"lane {lane}: {job.name} started (log: {log})", flush=True)
            try:  # never appended through a link (a tracked results/logs/... link could name any file)
                fd = open_nofollow(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            except OSError as err:
                self.outcomes[job] = Outcome(job, f"failed (log {log}: {err.strerror})")
                print(f"lane {lane}: {job.name} not started: {log}: {err.strerror}", flush=True)
                continue
            with open(fd, "a") as out:
                for attempt in range(LOCK_RETRIES + 1):
                    code = self._run_job(job, out)
                    if code is None:
                        return
                    if not (code == EXIT_LOCKED and _locked(log)) or attempt == LOCK_RETRIES:
                        break
                    # its folder is locked by a run still saving its checkpoint (a queue killed just
                    # before, whose runs got SIGTERM): wait for it rather than report a failure
                    print(f"lane {lane}: {job.name} is locked by a run still ending; retrying", flush=True)
                    if self._stopping.wait(LOCK_WAIT):
                        break
            with self._lock:
                del self._running[job]
            seconds = time.monotonic() - start
            held = code == EXIT_LOCKED and _locked(log)  # another process trains it: not a failure of the run
            status = (
                "trained"
                if code == 0
                else "stopped"
                if self._stopping.is_set()
                else "skipped: another process trains it"
                if held
                else f"failed (exit {code})"
            )
            self.outcomes[job] = Outcome(job, status, seconds)
            print(f"lane {lane}: {job.name} {status} after {seconds / 60:.1f} min", flush=True)

    def _lane_then(self, lane: int, done: threading.Event) -> None:
        try:
            self._lane(lane)
        finally:
            done.set()

    def _run_job(self, job: Job, out) -> int | None:
        """Start one job (None once the queue is stopping) and wait for its exit code."""
        with self._lock:
            if self._stopping.is_set():
                return None
            # own session: a Ctrl-C in the terminal reaches the queue only, which then sends each run one
            # SIGTERM (a second signal would make `train` give up without its checkpoint); PARENT_ENV: the
            # run asks the kernel for a SIGTERM when the queue dies, even by SIGKILL (`die_with_parent`)
            proc = subprocess.Popen(
                self.command(job),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, PARENT_ENV: str(os.getpid())},
            )
            self._running[job] = proc
        return proc.wait()

    def stop(self) -> None:
        """Hand out no more jobs; ask the running ones to save a checkpoint and exit (SIGTERM)."""
        with self._lock:
            self._stopping.set()
            for proc in self._running.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)

    def run(self) -> list[Outcome]:
        """Run every job; on Ctrl-C or SIGTERM (main thread only) `stop()` and wait for the running jobs to
        save their checkpoints (`interrupted` is then True). One `Outcome` per job, in the jobs' order."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        check_no_links(self.log_dir)  # one line (UnsafeFolder) before any job starts
        self.interrupted = False
        done = [threading.Event() for _ in range(self.lanes)]
        for i in range(self.lanes):
            threading.Thread(target=self._lane_then, args=(i + 1, done[i]), daemon=True).start()
        main_thread = threading.current_thread() is threading.main_thread()
        if main_thread:  # SIGTERM and SIGHUP (its terminal closed) as Ctrl-C: all stop the queue the same way
            previous = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
        # the lanes are waited for by their events, not Thread.join: a join that the signal interrupts can
        # leave the thread looking finished, and the queue would exit before its runs saved their checkpoints
        try:
            while not all(e.wait(0.2) for e in done):
                pass
        except KeyboardInterrupt:
            self.interrupted = True
            self.stop()
            while not all(e.wait(0.2) for e in done):
                pass
        finally:
            if main_thread:
                for s, handler in previous.items():
                    signal.signal(s, handler)
        return [self.outcomes[job] for job in self.jobs]


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


LOCK_WAIT, LOCK_RETRIES = 5.0, 24  # a locked run is retried every 5 s for 2 minutes
PARENT_ENV = "ATTNLIB_QUEUE_PID"  # set in each run's environment: the queue's pid


def _locked(log: Path) -> bool:
    """Whether the last lines of a job's log say its run folder was locked by another process."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            return b"being trained by another process" in f.read()
    except OSError:
        return False


def die_with_parent() -> None:
    """In a run started by `Queue` (PARENT_ENV set): ask the kernel (Linux prctl PR_SET_PDEATHSIG) for a
    SIGTERM when the queue dies, however it dies, so that no run outlives its queue (the run then saves a
    checkpoint and exits, as on Ctrl-C). A queue already gone: SIGTERM now. Elsewhere a no-op."""
    parent = os.environ.get(PARENT_ENV, "")
    if not parent.isdigit() or not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # the queue died before the request: it will never come
        os.kill(os.getpid(), signal.SIGTERM)
