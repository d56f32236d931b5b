"""Real servers the service's tests start themselves: a PostgreSQL cluster of their own (Debian's
`postgresql` package; CI installs it) and the service (`python -m e2e.service serve`)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
POSTGRES_INSTALL = "apt-get install -y postgresql"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before it listened on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listened on port {port} within {seconds} s")


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


class Postgres:
    """A PostgreSQL cluster in a folder of its own, on a free port, trusting local
    connections; as the `postgres` user when run as root (initdb refuses root), so its folder
    is made where that user can reach it (not under pytest's root-only temporary folder)."""

    def __init__(self):
        self.bin = postgres_bin()
        if self.bin is None:
            message = f"the PostgreSQL tests need Debian's postgresql package: {POSTGRES_INSTALL}"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
        self.folder = Path(tempfile.mkdtemp(prefix="e2e-postgres-"))
        self.port = free_port()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.folder, "postgres", "postgres")
        self.data = self.folder / "data"
        self.databases = 0

    def _run(self, *command: str) -> None:
        done = subprocess.run([*self.as_user, *command], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}")

    def start(self) -> "Postgres":
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "--auth=trust", "-U", "postgres", "-E", "UTF8")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"), "-w", "start"
        )
        return self

    def stop(self) -> None:
        subprocess.run(
            [*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )

    def new_database(self) -> str:
        """A new empty database's URL."""
        import psycopg

        self.databases += 1
        name = f"e2e_{self.databases}"
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"


class Service:
    """`python -m e2e.service serve` on a free port, over `db`, with `token`."""

    def __init__(self, db: str, token: str, log: Path, *options: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        env = {**os.environ, "E2E_SERVICE_TOKEN": token}
        command = [sys.executable, "-m", "e2e.service", "serve", "--db", db, "--port", str(self.port), *options]
        if "--scheduler" not in options:
            command += ["--scheduler", "none"]  # no cluster unless a test asks for one
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        try:
            wait_for_port(self.port, self.process)
        except RuntimeError as error:
            raise RuntimeError(f"{error}\n{log.read_text()}") from None

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
