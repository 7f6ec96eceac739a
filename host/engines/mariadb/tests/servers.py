"""Real mariadbd processes for the tests: each on a free loopback port, with
its own data directory and plugin directory under a temporary directory,
the library copied into that plugin directory and sql/install.sql run."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
INSTALL_SQL = os.path.join(HERE, "..", "sql", "install.sql")
LIBRARY = os.environ.get("FENCING_MARIADB_LIB", "")

_template = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _data_template():
    """One initialised data directory, copied for every server (mariadb-install-db takes seconds)."""
    global _template
    if _template is None:
        base = tempfile.mkdtemp(prefix="fencing-mariadb-template-")
        data = os.path.join(base, "data")
        args = ["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--auth-root-authentication-method=normal",
                "--skip-test-db"]
        if os.geteuid() == 0:
            args.append("--user=root")
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _template = data
    return _template


def remove_template():
    if _template is not None:
        shutil.rmtree(os.path.dirname(_template), ignore_errors=True)


class Server:
    """A mariadbd with the fencing library installed (self.port, self.client(), self.cli())."""

    def __init__(self, server_id=1, log_bin=False, install=True):
        self.dir = tempfile.mkdtemp(prefix="fencing-mariadb-")
        self.data = os.path.join(self.dir, "data")
        shutil.copytree(_data_template(), self.data)
        self.plugins = os.path.join(self.dir, "plugins")
        os.mkdir(self.plugins)
        if not LIBRARY:
            raise RuntimeError("set FENCING_MARIADB_LIB to libfencing_mariadb.so (scripts/test-mariadb does)")
        shutil.copy(LIBRARY, os.path.join(self.plugins, "libfencing_mariadb.so"))
        self.files = os.path.join(self.dir, "files")
        os.mkdir(self.files)
        self.socket = os.path.join(self.dir, "mysqld.sock")
        self.port = free_port()
        self.server_id = server_id
        self.log_bin = log_bin
        self.proc = None
        self.start()
        if install:
            self.cli_file(INSTALL_SQL)

    def start(self):
        args = [
            "mariadbd", "--no-defaults", f"--datadir={self.data}", f"--socket={self.socket}", f"--port={self.port}",
            "--bind-address=127.0.0.1", f"--plugin-dir={self.plugins}", f"--log-error={self.dir}/error.log",
            f"--pid-file={self.dir}/mariadbd.pid", f"--server-id={self.server_id}", "--skip-name-resolve",
            f"--secure-file-priv={self.files}", "--local-infile=1", "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=48M", "--max-connections=200", "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
        ]
        if self.log_bin:
            args += [f"--log-bin={self.dir}/binlog", "--binlog-format=MIXED"]
        if os.geteuid() == 0:
            args.append("--user=root")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                pymysql.connect(unix_socket=self.socket, user="root").close()
                return
            except pymysql.err.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"mariadbd did not start: {self.error_log()[-2000:]}")
                time.sleep(0.1)

    def error_log(self):
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()
        except OSError:
            return ""

    def client(self, user="root", password="", database=None, **kw):
        """A PyMySQL connection over TCP (autocommit on)."""
        return pymysql.connect(host="127.0.0.1", port=self.port, user=user, password=password, database=database,
                               autocommit=True, **kw)

    def cli(self, sql, user="root", password=None, database=None, check=True, extra=()):
        """Runs `sql` with the mariadb command-line client; its CompletedProcess."""
        args = ["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(self.port), "-u", user, "-N", "-B", *extra]
        if password:
            args.append(f"-p{password}")
        if database:
            args.append(database)
        done = subprocess.run(args, input=sql, text=True, capture_output=True)
        if check and done.returncode != 0:
            raise AssertionError(f"mariadb failed: {done.stderr}")
        return done

    def cli_file(self, path):
        with open(path) as f:
            self.cli(f.read())

    def stop(self, kill=False):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def destroy(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
