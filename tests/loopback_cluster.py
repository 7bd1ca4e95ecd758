"""A whole deployment on 127.0.0.1 for tests: PostgreSQL, an S3 server (moto), a Dask scheduler and workers.

`LoopbackCluster.start(tmp)` starts each service as a child process on a free
port, and `stop()` ends exactly those processes. `unavailable()` says in one
sentence why the services cannot be started here (a missing program or
package), so a test can skip with that reason. Every worker has its own data
home: what the workers share is only the Dagster instance (PostgreSQL) and
the store (`s3://` on the moto server), as on separate machines.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
BUCKET = "reveriemem-loopback"


def _postgres_bin() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


def unavailable() -> str | None:
    """Why the loopback deployment cannot start here, or None when it can."""
    if _postgres_bin() is None:
        return "PostgreSQL is not installed (apt-get install postgresql)"
    for module in ("dagster_postgres", "dagster_dask", "moto", "boto3"):
        try:
            __import__(module)
        except ImportError:
            return f"the Python package {module} is not installed (pip install -e '.[deploy]')"
    for program in ("dask", "moto_server"):
        if not (BIN / program).exists():
            return f"the program {program} is not installed beside {sys.executable}"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "PostgreSQL cannot run as root and runuser is missing"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {seconds:.0f}s")


@dataclass
class LoopbackCluster:
    root: Path
    pg_port: int = 0
    s3_port: int = 0
    dask_port: int = 0
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    pg_data: Path | None = None

    @property
    def scheduler(self) -> str:
        return f"tcp://127.0.0.1:{self.dask_port}"

    @property
    def store(self) -> str:
        return f"s3://{BUCKET}/reveriemem"

    def env(self, home: Path) -> dict[str, str]:
        """The environment of a process of this deployment with its own data home."""
        env = {key: value for key, value in os.environ.items() if not key.startswith(("REVERIEMEM_", "AWS_"))}
        env.update(
            REVERIEMEM_HOME=str(home), DAGSTER_HOME=str(self.root / "dagster"), REVERIEMEM_STORE=self.store,
            REVERIEMEM_S3_ENDPOINT=f"http://127.0.0.1:{self.s3_port}", AWS_ACCESS_KEY_ID="loopback",
            AWS_SECRET_ACCESS_KEY="loopback", AWS_REGION="us-east-1", REVERIEMEM_LM="none",
            REVERIEMEM_EMBEDDER="hash", PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
        )
        return env

    def _spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env or os.environ.copy(),
                                   cwd=self.root, start_new_session=True)
        self.processes[name] = process
        return process

    def _postgres(self) -> None:
        bin_dir = _postgres_bin()
        assert bin_dir is not None
        # root may not run PostgreSQL: then it runs as the package's `postgres` user, in a folder it can reach
        as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        data = Path(tempfile.mkdtemp(prefix="reveriemem-pg-"))
        self.pg_data = data
        if as_user:
            shutil.chown(data, "postgres")
        done = subprocess.run([*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "reveriemem",
                               "--auth=trust", "-E", "UTF8"], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()[-500:]}")
        self._spawn("postgres", [*as_user, str(bin_dir / "postgres"), "-D", str(data), "-p", str(self.pg_port),
                                 "-k", str(data), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
        _wait_for_port(self.pg_port, "PostgreSQL")
        import psycopg2

        for _ in range(50):
            try:
                connection = psycopg2.connect(host="127.0.0.1", port=self.pg_port, user="reveriemem", dbname="postgres")
                break
            except psycopg2.OperationalError:  # still starting up
                time.sleep(0.2)
        connection.autocommit = True
        connection.cursor().execute("CREATE DATABASE dagster")
        connection.close()
        (self.root / "dagster").mkdir()
        (self.root / "dagster" / "dagster.yaml").write_text(
            "storage:\n  postgres:\n    postgres_db:\n      hostname: 127.0.0.1\n"
            f"      port: {self.pg_port}\n      username: reveriemem\n      password: unused\n"
            "      db_name: dagster\n      scheme: postgresql+psycopg2\ntelemetry:\n  enabled: false\n", encoding="utf-8")

    def _s3(self) -> None:
        self._spawn("s3", [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(self.s3_port)])
        _wait_for_port(self.s3_port, "the S3 server")
        import boto3

        boto3.client("s3", endpoint_url=f"http://127.0.0.1:{self.s3_port}", aws_access_key_id="loopback",
                     aws_secret_access_key="loopback", region_name="us-east-1").create_bucket(Bucket=BUCKET)

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        home = self.root / f"home-{name}"
        return self._spawn(name, [str(BIN / "dask"), "worker", self.scheduler, "--nthreads", "1", "--nworkers", "1",
                                  "--name", name, "--no-dashboard", "--local-directory", str(self.root / name)],
                           self.env(home))

    @classmethod
    def start(cls, root: Path, workers: int = 2) -> LoopbackCluster:
        cluster = cls(root, free_port(), free_port(), free_port())
        try:
            cluster._postgres()
            cluster._s3()
            cluster._spawn("scheduler", [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port",
                                         str(cluster.dask_port), "--no-dashboard"], cluster.env(root / "home-scheduler"))
            _wait_for_port(cluster.dask_port, "the Dask scheduler")
            for index in range(workers):
                cluster.start_worker(f"worker-{index + 1}")
            cluster.wait_for_workers(workers)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def wait_for_workers(self, count: int, seconds: float = 90.0) -> None:
        from dask.distributed import Client

        with Client(self.scheduler, timeout=30) as client:
            client.wait_for_workers(count, timeout=seconds)

    def kill(self, name: str) -> None:
        """kill -9 one process of the deployment (a worker lost with its machine)."""
        process = self.processes[name]
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def stop(self) -> None:
        for name, process in reversed(list(self.processes.items())):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM if name == "postgres" else signal.SIGKILL)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=20)
        if self.pg_data is not None:
            shutil.rmtree(self.pg_data, ignore_errors=True)
