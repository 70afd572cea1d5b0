"""Hosts that share nothing but the network: Linux network namespaces on one bridge, each
process in its own mount namespace in which the other hosts' files do not exist.

A :class:`Network` makes a bridge (``icf27-br``, ``10.227.0.1/24``: the test process's
side, the "client machine") and, per :class:`Host`, a network namespace ``icf27-<name>``
with a veth pair on the bridge and an address ``10.227.0.<n>``. Every process a host runs
(:meth:`Host.popen`) starts in a new mount namespace where

- ``/tmp``, ``/work`` and ``/home`` are empty tmpfs: this machine's working trees, its
  ``.venv``, the test's temp directories and every other host's files do not exist;
- the host's own disk (a directory of the test's temp dir) is at the same path as
  outside, and at ``/srv/host``; ``/opt/spark`` is a Spark installation (the pip
  package's ``SPARK_HOME``, read-only), as an administrator installs Spark on nodes;
- the base Python interpreter (``/root/.pyenv``) and Java stay where the OS has them.

Data, checkpoints and the catalog are reached over the network only (S3, REST). Nothing
here sends a packet outside the bridge: no route, no forwarding, private addresses.

Needs root (``ip netns``, ``unshare``). :meth:`Network.close` kills every process of every
host (the whole namespace: ``ip netns pids``) and removes the namespaces and the bridge;
:func:`cleanup_leftovers` removes what an interrupted run left.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "icf27-"
BRIDGE = f"{PREFIX}br"
SUBNET = "10.227.0"
CLIENT_ADDRESS = f"{SUBNET}.1"
"""The bridge's address in the root namespace: the test process (the user's machine)."""

HIDDEN = ("/tmp", "/work", "/home")
"""Directories replaced by an empty tmpfs in every host's mount namespace."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def require_root() -> None:
    """Fail at once, in one line, when network namespaces cannot be made."""
    if os.geteuid() != 0:
        raise PermissionError("the cluster tier needs root (ip netns, unshare --mount): "
                              "run make test-cluster as root")


SHARED_GLOB = "/var/tmp/icf27-shared-*"
"""Directories a test shares between hosts (a filesystem every host mounts alike)."""


def fuse_mounts() -> list[str]:
    """The mount points of FUSE filesystems (``weed mount``...) of the tier (an ``icf27``
    path) in this process's mount namespace. A host's mounts live in its own mount
    namespace and go with its last process; one made here would outlive the run."""
    with open("/proc/self/mounts") as mounts:
        fields = [line.split(" ") for line in mounts]
    return [f[1] for f in fields if len(f) > 2 and f[2].startswith("fuse") and "icf27" in f[1]]


def cleanup_leftovers() -> None:
    """Kill the processes of and remove every ``icf27-`` namespace and the bridge,
    unmount the tier's FUSE mounts (:func:`fuse_mounts`) and remove the shared
    directories (:data:`SHARED_GLOB`) a run left."""
    for mount in fuse_mounts():
        subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
    for path in glob.glob(SHARED_GLOB):
        shutil.rmtree(path, ignore_errors=True)
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    for line in listed:
        name = line.split(" ")[0]
        if name.startswith(PREFIX):
            _kill_namespace(name)
            _ip("netns", "delete", name, check=False)
    _ip("link", "delete", BRIDGE, check=False)


def _namespace_pids(netns: str) -> list[int]:
    out = _ip("netns", "pids", netns, check=False).stdout
    return [int(p) for p in out.split()]


def _kill_namespace(netns: str, timeout_s: float = 30.0) -> int:
    """SIGKILL every process in ``netns`` until none is left; returns how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while True:
        pids = _namespace_pids(netns)
        if not pids:
            return len(killed)
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {pids} of {netns} survived SIGKILL")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.1)


@dataclass
class Host:
    """One machine: a network namespace with one address, its own disk under ``disk``."""

    name: str
    address: str
    disk: Path
    mounts: dict[str, str] = field(default_factory=dict)
    """Extra read-only binds, target -> source (made before the hidden dirs are hidden)."""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def netns(self) -> str:
        return f"{PREFIX}{self.name}"

    @property
    def veth(self) -> str:
        return f"{PREFIX}{self.name}"[:15]

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as run on this host: in its network namespace and a new mount namespace
        with the other hosts' files hidden (see the module docstring). The host's disk is
        at its own path (and at ``/srv/host``); its working directory is the disk."""
        disk = shlex.quote(str(self.disk))
        setup = ["mount -t tmpfs icf27-srv /srv", "mkdir /srv/host",
                 f"mount --bind {disk} /srv/host", "mount -t tmpfs icf27-opt /opt"]
        for target, source in self.mounts.items():
            setup += [f"mkdir -p {shlex.quote(target)}",
                      f"mount --bind {shlex.quote(source)} {shlex.quote(target)}",
                      f"mount -o remount,bind,ro {shlex.quote(target)}"]
        setup += [f"mount -t tmpfs icf27-hidden {d}" for d in HIDDEN]
        setup += [f"mkdir -p {disk}", f"mount --bind /srv/host {disk}", f"cd {disk}"]
        script = " && ".join(setup) + ' && exec "$@"'
        return ["ip", "netns", "exec", self.netns, "unshare", "--mount",
                "--propagation", "private", "--", "sh", "-c", script, "sh", *argv]

    def popen(self, argv: Sequence[str], log: str, env: Mapping[str, str] | None = None
              ) -> subprocess.Popen[bytes]:
        """Start ``argv`` on this host; its output goes to ``/srv/host/<log>``."""
        out = (self.disk / log).open("ab")
        try:
            process = subprocess.Popen(self.wrap(argv), stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=dict(env or {}),
                                       start_new_session=True)
        finally:
            out.close()
        self.processes.append(process)
        return process

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
            timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on this host to completion (output captured)."""
        return subprocess.run(self.wrap(argv), capture_output=True, text=True,
                              env=dict(env or {}), timeout=timeout_s)

    def pids(self) -> list[int]:
        """The processes of the host (its network namespace) still alive."""
        return _namespace_pids(self.netns)

    def kill(self) -> int:
        """SIGKILL every process of the host (the whole namespace); returns the count."""
        count = _kill_namespace(self.netns)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        self.processes.clear()
        return count

    def link(self, up: bool) -> None:
        """Cut the host off the network (``down``) or bring it back."""
        _ip("link", "set", self.veth, "up" if up else "down")

    def log(self, name: str) -> str:
        path = self.disk / name
        return path.read_text(errors="replace") if path.exists() else ""


class Network:
    """The bridge and the hosts on it. Use as a context manager: leaving it kills every
    host's processes and removes the namespaces and the bridge, also after a failure."""

    def __init__(self, root: Path) -> None:
        require_root()
        self.root = root
        self.hosts: dict[str, Host] = {}

    def __enter__(self) -> Network:
        cleanup_leftovers()
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{CLIENT_ADDRESS}/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        return self

    def add(self, name: str, mounts: Mapping[str, str] | None = None) -> Host:
        """A new host ``name`` at the next address, with an empty disk."""
        address = f"{SUBNET}.{10 + len(self.hosts)}"
        disk = self.root / "hosts" / name
        disk.mkdir(parents=True)
        host = Host(name, address, disk, dict(mounts or {}))
        peer = f"{PREFIX}{name}-p"[:15]
        _ip("netns", "add", host.netns)
        _ip("link", "add", host.veth, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", host.netns)
        _ip("link", "set", host.veth, "master", BRIDGE)
        _ip("link", "set", host.veth, "up")
        inside = ["netns", "exec", host.netns, "ip"]
        _ip(*inside, "link", "set", "lo", "up")
        _ip(*inside, "link", "set", peer, "name", "eth0")
        _ip(*inside, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip(*inside, "link", "set", "eth0", "up")
        self.hosts[name] = host
        return host

    def close(self) -> None:
        for host in self.hosts.values():
            with contextlib.suppress(Exception):
                host.kill()
            _ip("netns", "delete", host.netns, check=False)
            _ip("link", "delete", host.veth, check=False)
        self.hosts.clear()
        _ip("link", "delete", BRIDGE, check=False)

    def __exit__(self, *exc: object) -> None:
        self.close()
