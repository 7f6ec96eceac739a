package etcdlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencing/fencing/host/packages/go/guard"
	"github.com/jackc/pgx/v5/pgconn"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// A holder of an etcd lock is paused until its session's lease expires; a
// second client takes the lock and writes; the first wakes and writes with
// its old token. The guard refuses it, and so does a PostgreSQL table under
// fencing.protect, and the data keeps the second holder's write.
func TestAPausedEtcdHoldersLateWriteIsRefused(t *testing.T) {
	endpoint := startEtcd(t)
	db := startPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, sql := range []string{
		"CREATE TABLE orders (id text PRIMARY KEY, body text, token bigint)",
		"SELECT fencing.protect('orders', 'id', 'token')",
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	g, err := guard.New()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var fence *guard.Fence
	write := func(token uint64) (guard.Decision, error) {
		d, err := g.Admit(fence, guard.Sequencer{Lock: "/locks/orders", Token: token}, guard.NonDecreasing)
		if err != nil || !d.Admitted() {
			return d, err
		}
		fence = &guard.Fence{Lock: "/locks/orders", HighWater: d.HighWater, Sequence: d.Sequence}
		return d, nil
	}
	upsert := func(token uint64, body string) error {
		_, err := db.Exec(ctx, `INSERT INTO orders VALUES ('orders-1', $1, $2)
			ON CONFLICT (id) DO UPDATE SET body = excluded.body, token = excluded.token`, body, int64(token))
		return err
	}

	// The first holder: a session whose lease lives 2 s without keep-alives.
	sessionA, err := concurrency.NewSession(etcdClient(t, endpoint), concurrency.WithTTL(2))
	if err != nil {
		t.Fatal(err)
	}
	lockA := concurrency.NewMutex(sessionA, "/locks/orders")
	if err := lockA.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tokenA, err := Token(ctx, etcdClient(t, endpoint), lockA)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := write(tokenA); err != nil || !d.Admitted() {
		t.Fatalf("the first holder's write: %+v %v", d, err)
	}
	if err := upsert(tokenA, "A"); err != nil {
		t.Fatalf("the first holder's row: %v", err)
	}

	// It pauses: no more keep-alives, and its lease expires.
	sessionA.Orphan()
	sessionB, err := concurrency.NewSession(etcdClient(t, endpoint), concurrency.WithTTL(30))
	if err != nil {
		t.Fatal(err)
	}
	defer sessionB.Close()
	lockB := concurrency.NewMutex(sessionB, "/locks/orders")
	if err := lockB.Lock(ctx); err != nil {
		t.Fatalf("the second client waited for the lock: %v", err)
	}
	tokenB, err := Token(ctx, etcdClient(t, endpoint), lockB)
	if err != nil || tokenB <= tokenA {
		t.Fatalf("the second holder's token %d (first %d): %v", tokenB, tokenA, err)
	}
	if d, err := write(tokenB); err != nil || !d.NewTerm() {
		t.Fatalf("the second holder's write: %+v %v", d, err)
	}
	if err := upsert(tokenB, "B"); err != nil {
		t.Fatalf("the second holder's row: %v", err)
	}

	// The first wakes and writes with its old token: refused in both places.
	if _, err := Token(ctx, etcdClient(t, endpoint), lockA); err == nil {
		t.Fatal("the expired holder's key is still there")
	}
	d, err := write(tokenA)
	if err != nil || d.Verdict != guard.StaleToken || d.Presented != tokenA || d.HighWater != tokenB {
		t.Fatalf("the late write through the guard: %+v %v", d, err)
	}
	var pgErr *pgconn.PgError
	if err := upsert(tokenA, "late"); !errors.As(err, &pgErr) || pgErr.Code != "FN001" {
		t.Fatalf("the late write to PostgreSQL: %v", err)
	}
	var body string
	var token int64
	if err := db.QueryRow(ctx, "SELECT body, token FROM orders WHERE id = 'orders-1'").Scan(&body, &token); err != nil {
		t.Fatal(err)
	}
	if body != "B" || uint64(token) != tokenB {
		t.Fatalf("the row holds %q with token %d; want B with %d", body, token, tokenB)
	}
	t.Logf("tokens: paused holder %d, new holder %d; the late write refused by the guard (%v) and by PostgreSQL (%s)",
		tokenA, tokenB, d.Verdict, pgErr.Code)
}
