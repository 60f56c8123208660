"""A node on loopback for the remote tests and bench/remote_bench.py: a real sshd with keys made
here, and an ssh client config that names it `node1`/`node2` (direct), `other` (a second user) and
`slow` (through programs/delay_relay.py: 25 ms each way, 10 MB/s)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import LAUNCHER, base_env, wait_for

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
RELAY = Path(__file__).parent / "programs" / "delay_relay.py"
SSH_USER = "stallscope-ssh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """A node on loopback: sshd, a client config naming it `node1`/`node2` (direct) and `slow`
    (through the delaying relay), and the environment that makes stallscope use that config."""

    def __init__(self, root: Path):
        self.root = root
        # sshd reads a user's authorized keys as that user: the folder is open to all.
        keys = self.keys = Path(tempfile.mkdtemp(prefix="stallscope-sshkeys-", dir="/tmp"))
        os.chmod(keys, 0o755)
        for name in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / name)], check=True)
        pub = (root / "user_key.pub").read_text()
        for user in ("root", SSH_USER):
            (keys / user).write_text(pub)
            os.chmod(keys / user, 0o644)
        self.port = free_port()
        (root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {root}/host_key\nPidFile {root}/sshd.pid\n"
            f"AuthorizedKeysFile {keys}/%u\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n")
        Path("/run/sshd").mkdir(exist_ok=True)
        self.sshd = subprocess.Popen([SSHD, "-D", "-e", "-f", str(root / "sshd_config")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.relay_pids = root / "relay.pids"
        common = (f"  HostName 127.0.0.1\n  Port {self.port}\n  IdentityFile {root}/user_key\n"
                  "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  BatchMode yes\n")
        (root / "ssh_config").write_text(
            f"Host node1 node2\n  User root\n{common}"
            f"Host other\n  User {SSH_USER}\n{common}"
            f"Host slow\n  User root\n{common}"
            f"  ProxyCommand {sys.executable} {RELAY} --connect 127.0.0.1:{self.port} --pidfile {self.relay_pids}"
            f" --refuse-if {root}/link_down\n")
        assert wait_for(self._listening, 20), "sshd did not start: " + self.sshd.stderr.read1().decode(errors="replace")

    def _listening(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def env(self, **extra) -> dict:
        settings = {"STALLSCOPE_SSH": f"ssh -F {self.root}/ssh_config", "STALLSCOPE_REMOTE_COMMAND": str(LAUNCHER)}
        settings.update(extra)
        return base_env(**settings)

    def cut_link(self) -> int:
        """Kills every relay process (the `slow` host's link) and keeps new ones from starting until
        restore_link(); returns how many there were."""
        (self.root / "link_down").write_text("")
        n = 0
        for line in self.relay_pids.read_text().split() if self.relay_pids.exists() else []:
            try:
                os.kill(int(line), signal.SIGKILL)
                n += 1
            except ProcessLookupError:
                pass
        return n

    def restore_link(self):
        (self.root / "link_down").unlink(missing_ok=True)

    def stop(self):
        self.sshd.terminate()
        self.sshd.wait(timeout=30)
        shutil.rmtree(self.keys, ignore_errors=True)
