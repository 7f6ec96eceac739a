package etcdlock

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Throwaway servers on 127.0.0.1 for the tests: etcd and PostgreSQL 15 with
// the fencing extension installed (scripts/pg-extension install). Without
// them the tests are skipped, unless FENCING_REQUIRE_SERVERS is set
// (scripts/test-go sets it), when they fail.

func missing(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("FENCING_REQUIRE_SERVERS") != "" {
		t.Fatalf("%s (FENCING_REQUIRE_SERVERS is set)", what)
	}
	t.Skip(what)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEtcd runs an etcd member in a temporary directory: its client endpoint.
func startEtcd(t *testing.T) string {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		missing(t, "etcd is not installed")
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--data-dir", t.TempDir(), "--name", "go-test",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "go-test="+peer, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	cli := etcdClient(t, client)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "ready")
		cancel()
		if err == nil {
			return client
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not start: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func etcdClient(t *testing.T, endpoint string) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// startPostgres runs PostgreSQL 15 in a temporary directory (as the postgres
// user when the test runs as root) and connects to it with the fencing
// extension created.
func startPostgres(t *testing.T) *pgx.Conn {
	bin := os.Getenv("FENCING_PG_BIN")
	if bin == "" {
		bin = "/usr/lib/postgresql/15/bin"
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		missing(t, "PostgreSQL 15 is not installed")
	}
	dir, err := os.MkdirTemp("", "fencing-go-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var runAs []string
	if os.Geteuid() == 0 {
		runAs = []string{"runuser", "-u", "postgres", "--"}
		if out, err := exec.Command("chown", "postgres", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown postgres %s: %v %s", dir, err, out)
		}
	}
	command := func(name string, args ...string) *exec.Cmd {
		argv := append(append(append([]string{}, runAs...), filepath.Join(bin, name)), args...)
		return exec.Command(argv[0], argv[1:]...)
	}
	data := filepath.Join(dir, "data")
	if out, err := command("initdb", "-A", "trust", "-U", "fencing", "-E", "UTF8", "--no-locale", "-D", data).CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v %s", err, out)
	}
	port := freePort(t)
	server := command("postgres", "-D", data, "-p", fmt.Sprint(port), "-c", "listen_addresses=127.0.0.1", "-k", dir)
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	url := fmt.Sprintf("postgres://fencing@127.0.0.1:%d/postgres", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			t.Cleanup(func() { conn.Close(context.Background()) })
			if _, err := conn.Exec(context.Background(), "CREATE EXTENSION fencing"); err != nil {
				if strings.Contains(err.Error(), "is not available") {
					missing(t, "the fencing extension is not installed (scripts/pg-extension install)")
				}
				t.Fatal(err)
			}
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres did not start: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
