"""Disks of their own for a local cluster's nodes: a tmpfs under each node's JetStream storage.

Mounting needs root (tests run as root). A nats-server takes 75% of its
disk's free space at start as its storage limit, so a small disk is a node
that fills; :func:`fill` takes a disk's last free byte from under a running
node instead, as another program filling the machine's disk would.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
from collections.abc import Iterator, Sequence

from connector.devtools.local_cluster import LocalCluster

__all__ = ["fill", "node_disks"]

#: The file :func:`fill` writes on a disk.
BALLAST = "ballast"


@contextlib.contextmanager
def node_disks(cluster: LocalCluster, sizes: Sequence[str]) -> Iterator[list[pathlib.Path]]:
    """A tmpfs of ``sizes[n]`` (``mount`` sizes: ``4m``) under node n's storage; unmounted after.

    Use before the cluster starts.
    """
    mounted: list[pathlib.Path] = []
    try:
        for node, size in enumerate(sizes):
            where = pathlib.Path(cluster.directory) / cluster.node_name(node)
            where.mkdir(parents=True)
            mount = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]
            subprocess.run(mount, check=True)
            mounted.append(where)
        yield mounted
    finally:
        for where in mounted:
            subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: pathlib.Path) -> pathlib.Path:
    """Writes a file taking every free byte of ``disk``; returns it (remove it to give room)."""
    ballast = disk / BALLAST
    stats = os.statvfs(disk)
    with open(ballast, "wb", buffering=0) as file, contextlib.suppress(OSError):  # full: done
        file.write(b"\0" * (stats.f_bavail * stats.f_frsize))
    return ballast
