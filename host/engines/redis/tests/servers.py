"""Throwaway redis-server processes on 127.0.0.1 with the module loaded."""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import redis

MODULE = os.environ.get("FENCING_REDIS_MODULE", "")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A redis-server with the module, append-only with fsync always."""

    def __init__(self, *extra, directory=None, port=None, module_args=(), load_module=True):
        if not MODULE or not os.path.exists(MODULE):
            raise RuntimeError("set FENCING_REDIS_MODULE to the built libfencing_redis.so (scripts/test-redis)")
        self.owned = directory is None
        self.dir = directory or tempfile.mkdtemp(prefix="fencing-redis-")
        self.port = port or free_port()
        self.extra = list(extra)
        self.module_args = list(module_args)
        self.load_module = load_module
        self.start()

    def start(self):
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                "--appendonly", "yes", "--appendfsync", "always", "--save", "",
                *(["--loadmodule", MODULE, *self.module_args] if self.load_module else []), *self.extra]
        self.log = open(os.path.join(self.dir, "redis.log"), "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                self.client().ping()
                return
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = self.log_text()[-2000:]
                    self.stop()
                    raise RuntimeError(f"redis-server did not start: {log}")
                time.sleep(0.05)

    def log_text(self):
        with open(os.path.join(self.dir, "redis.log"), errors="replace") as f:
            return f.read()

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=60)

    def alive(self):
        """Whether redis-server is still running (a module crash ends it)."""
        return self.proc.poll() is None

    def restart(self, module_args=None):
        """Stops redis-server (SIGTERM: it writes what it must) and starts it again on its files."""
        if module_args is not None:
            self.module_args = list(module_args)
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self.log.close()
        self.start()

    def wait_for(self, section, field, value, timeout=30):
        """Waits until INFO <section> shows <field> equal to <value>."""
        deadline = time.monotonic() + timeout
        r = self.client()
        while str(r.info(section).get(field)) != str(value):
            if time.monotonic() > deadline:
                raise AssertionError(f"INFO {section} {field} never became {value}")
            time.sleep(0.05)

    def kill9(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()

    def stop(self):
        if self.proc.poll() is None:
            # SHUTDOWN may be refused while an AOF rewrite runs (as after a promotion): then kill.
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if self.owned:
            shutil.rmtree(self.dir, ignore_errors=True)
