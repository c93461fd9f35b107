"""A real SLURM cluster on this machine, for the tests: :func:`start_cluster`.

Debian's ``slurm-wlm`` and ``munge`` (``scripts/setup.sh`` installs them as root), run from a private
directory: one ``munged`` with its own key and socket, one ``slurmctld`` and one ``slurmd`` per node,
all on 127.0.0.1 with free ports, so nothing of the machine's own ``/etc/slurm`` or ``/run/munge``
is used or changed. The node has the machine's CPUs and memory (``slurmd -C``); processes are
tracked by process group (no cgroups: containers rarely let slurmd create them).

Several nodes on one host: slurmd's "multiple slurmd" mode, one ``slurmd -N <node>`` per node with
its own port, spool, pid and log (``%n`` in slurm.conf); Debian's slurm-wlm 22.05 supports it. Node
names are ones that resolve to this host (its host name, then ``localhost``), because the templates
find rank 0's address from the first node's name, as on a real cluster.

:func:`tools_missing` names the programs that are absent; the tests fail on a machine that
``scripts/setup.sh`` prepared (it writes :data:`SETUP_MARKER`) and skip elsewhere.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from clirun import free_port

REPO = Path(__file__).resolve().parents[1]
SETUP_MARKER = REPO / ".venv" / "slurm-installed"
"""Written by scripts/setup.sh after it installed (or found) slurm-wlm and munge."""
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scontrol", "scancel")
KILL_WAIT_S = 60
"""Seconds between SIGTERM and SIGKILL at a time limit or scancel: room for a checkpoint."""


def tools_missing() -> List[str]:
    """The SLURM / munge programs not on PATH (also looked for in /usr/sbin)."""
    return [p for p in PROGRAMS if _which(p) is None]


def _which(program: str) -> Optional[str]:
    return shutil.which(program) or shutil.which(program, path="/usr/sbin:/sbin")


def node_resources() -> Dict[str, str]:
    """CPUs, Boards, SocketsPerBoard, CoresPerSocket, ThreadsPerCore, RealMemory of this machine (``slurmd -C``)."""
    out = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True, timeout=60, check=True).stdout
    first = out.splitlines()[0]
    found = dict(re.findall(r"(\w+)=(\S+)", first))
    keys = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    return {k: found[k] for k in keys if k in found}


@dataclass
class SlurmCluster:
    """A running cluster: ``env`` holds SLURM_CONF for every client command (sbatch, srun, scontrol)."""

    root: Path
    conf: Path
    nodes: List[str]
    env: Dict[str, str]
    daemons: List[subprocess.Popen] = field(default_factory=list)

    def run(self, *cmd: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        """A client command (``scontrol``, ``squeue``, ``scancel`` ...) against this cluster."""
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=self.env)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}\n{self.logs()}")
        return proc

    def sbatch(self, *args: str, env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None) -> int:
        """Submit a batch job; its id. ``env`` is added to the cluster's environment (sbatch exports it all)."""
        proc = subprocess.run(
            [_which("sbatch"), "--parsable", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**self.env, **(env or {})},
            cwd=cwd,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"sbatch {' '.join(args)} failed: {proc.stdout}{proc.stderr}\n{self.logs()}")
        return int(proc.stdout.strip().split(";")[0])

    def job(self, job_id: int) -> Dict[str, str]:
        """``scontrol show job``'s fields (JobState, ExitCode, Restarts, RunTime ...)."""
        out = self.run(_which("scontrol"), "-o", "show", "job", str(job_id)).stdout
        return dict(re.findall(r"(\w+)=(\S*)", out))

    def wait_for(self, job_id: int, states: tuple, timeout: float) -> Dict[str, str]:
        """Poll until the job's state is one of ``states``; its fields. Raises TimeoutError with the logs."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.job(job_id)
            if info.get("JobState") in states:
                return info
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"job {job_id} still {info.get('JobState')} after {timeout} s: {info}\n{self.logs()}"
                )
            time.sleep(0.5)

    def idle(self) -> bool:
        """Every node idle: no job on it and none completing (a job's steps and epilog have ended)."""
        for proc in self.daemons:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args[0]} exited ({proc.returncode})\n{self.logs()}")
        out = self.run(_which("sinfo"), "-h", "-N", "-o", "%N %t", timeout=30).stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
        return all(states.get(n) == "idle" for n in self.nodes)

    def wait_idle(self, timeout: float) -> None:
        """Poll until every node is idle; RuntimeError with the logs after ``timeout`` seconds."""
        _wait(self.idle, timeout, "every node idle", self.logs)

    def logs(self) -> str:
        """The end of each daemon's log, for failure messages."""
        parts = []
        for log in sorted(self.root.glob("*.log")):
            parts.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel every job, stop the daemons (SIGTERM, then SIGKILL), wait for them."""
        subprocess.run([_which("scancel"), "--full", "--user", str(os.getuid())], env=self.env, capture_output=True)
        deadline = time.monotonic() + KILL_WAIT_S + 30  # the jobs' processes end (SIGKILL after KillWait)
        while self.daemons and self.daemons[-1].poll() is None and time.monotonic() < deadline:
            jobs = subprocess.run([_which("squeue"), "-h"], env=self.env, capture_output=True, text=True, timeout=30)
            if jobs.returncode != 0 or not jobs.stdout.strip():
                break
            time.sleep(0.5)
        for proc in reversed(self.daemons):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.daemons):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


def _write_conf(root: Path, nodes: List[str], munge_socket: Path) -> Path:
    host = socket.gethostname().split(".")[0]
    res = node_resources()
    ports = {"ctld": free_port(), **{n: free_port() for n in nodes}}
    (root / "state").mkdir()
    # slurmstepd's sockets live in the spool: a Unix socket path has at most 108 bytes, which pytest's
    # temporary folders (with xdist's popen-gwN/) exceed, so the spools go in a short folder of their own
    spools = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
    node_lines = []
    for n in nodes:
        spool = spools / f"spool-{n}"
        spool.mkdir()
        resources = " ".join(f"{k}={v}" for k, v in res.items())
        node_lines.append(
            f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={ports[n]} {resources} State=UNKNOWN"
        )
    conf = root / "slurm.conf"
    conf.write_text(
        "\n".join([
            "ClusterName=nssplatplus",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ports['ctld']}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={munge_socket}",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmdSpoolDir={spools}/spool-%n",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}",
            f"SlurmdPidFile={root}/slurmd-%n.pid",
            f"SlurmctldLogFile={root / 'slurmctld.log'}",
            f"SlurmdLogFile={root}/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # no cgroups: process groups track a job's processes, tasks are not bound to cores
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "ReturnToService=2",
            # SIGTERM at a time limit or scancel, SIGKILL this much later: the run saves a checkpoint
            f"KillWait={KILL_WAIT_S}",
            "InactiveLimit=0",
            "MinJobAge=600",
            "SlurmdTimeout=60",
            "SlurmctldTimeout=60",
            "MessageTimeout=30",
            *node_lines,
            f"PartitionName=debug Nodes={','.join(nodes)} Default=YES MaxTime=INFINITE State=UP",
            "",
        ])
    )  # fmt: skip
    (root / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
    return conf


def _wait(predicate, timeout: float, what: str, cluster_logs) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not within {timeout} s\n{cluster_logs()}")
        time.sleep(0.2)


def start_cluster(root: Path, nodes: int = 1) -> SlurmCluster:
    """munged, slurmctld and ``nodes`` slurmd in ``root``; returns once every node is idle.

    Args:
        root: an empty directory for keys, sockets, state, spools and logs (``*.log``).
        nodes: node daemons on this host; more than one needs slurmd's multiple-slurmd build.
    """
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)  # munged refuses a socket directory others can write to
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o600)
    munge_socket = root / "munge.socket"
    names = node_names(nodes)
    conf = _write_conf(root, names, munge_socket)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    for var in [v for v in env if v.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_")) and v != "SLURM_CONF"]:
        del env[var]  # a test run inside a SLURM job must not leak its job into this cluster
    cluster = SlurmCluster(root=root, conf=conf, nodes=names, env=env)
    try:
        munged = [
            _which("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={munge_socket}",
            f"--pid-file={root / 'munged.pid'}", f"--log-file={root / 'munged.log'}", f"--seed-file={root / 'munged.seed'}",
        ]  # fmt: skip
        cluster.daemons.append(_daemon(munged, root / "munged.out", env))
        _wait(munge_socket.exists, 30, "munged's socket", cluster.logs)
        cluster.daemons.append(_daemon([_which("slurmctld"), "-D", "-i", "-f", str(conf)], root / "slurmctld.out", env))
        for name in names:
            cluster.daemons.append(
                _daemon([_which("slurmd"), "-D", "-N", name, "-f", str(conf)], root / f"slurmd-{name}.out", env)
            )
        cluster.wait_idle(60)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _daemon(cmd: List[str], out: Path, env: Dict[str, str]) -> subprocess.Popen:
    with open(out, "w") as stream:
        return subprocess.Popen(cmd, stdout=stream, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def node_names(nodes: int) -> List[str]:
    """Node names that resolve to this machine: its host name, then ``localhost``. A job's scripts find
    rank 0's address from the first node's name (``scontrol show hostnames``), as on a real cluster."""
    names = [socket.gethostname().split(".")[0], "localhost"][:nodes]
    if len(set(names)) < nodes:
        raise RuntimeError(f"{nodes} nodes on one host: only {len(names)} names for this host ({names})")
    for name in names:
        socket.gethostbyname(name)  # fails here, not in the job, when the name does not resolve
    return names
