// Package etcdlock takes fencing tokens from a lock Go services already
// run: etcd's concurrency.Mutex (etcd client v3). The token of a held lock
// is the create revision of the holder's key, and a write carries it to a
// store that checks it (the guard package, or a table under the fencing
// PostgreSQL extension).
//
// Why the create revision is a fencing token: etcd's revision is one
// counter for the whole cluster, raised by every change and never lowered
// (not by deletes, compaction or restarts, since it is persisted with the
// data). A Mutex holder is the key with the lowest create revision under
// the lock's prefix; a waiter's key was created after it, so it has a
// higher revision, and a key created while someone holds the lock is
// higher still. When a holder's key goes (release, or its session's lease
// expiring while its process is paused), the next holder's key is the
// lowest of those left, all created after the old one: each holder's token
// is above every earlier holder's. The response header's revision at
// acquisition also grows, but the create revision is what identifies the
// holder's key, and any client can read it back.
package etcdlock

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Token returns the fencing token of m, which the caller holds: the create
// revision of its key.
func Token(ctx context.Context, cli *clientv3.Client, m *concurrency.Mutex) (uint64, error) {
	resp, err := cli.Get(ctx, m.Key())
	if err != nil {
		return 0, fmt.Errorf("etcdlock: read the lock key %q: %w", m.Key(), err)
	}
	if len(resp.Kvs) != 1 {
		return 0, fmt.Errorf("etcdlock: the lock key %q is gone: the session expired and the lock is lost", m.Key())
	}
	rev := resp.Kvs[0].CreateRevision
	if rev <= 0 {
		return 0, fmt.Errorf("etcdlock: the lock key %q has create revision %d", m.Key(), rev)
	}
	return uint64(rev), nil
}
