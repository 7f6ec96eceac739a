package org.fencing.examples.zookeeper;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.StandardLockInternalsDriver;
import org.apache.zookeeper.data.Stat;

/**
 * A Curator {@link InterProcessMutex} whose holder has a fencing token: the
 * creation zxid ({@code czxid}) of the holder's lock node.
 *
 * <p>Why that is a fencing token: a zxid is ZooKeeper's transaction id, one
 * counter for the ensemble (the leader's epoch in the high 32 bits, a counter
 * in the low 32), raised by every change and never lowered, across leader
 * elections and restarts (it is in the transaction log). The mutex's holder
 * is the child with the lowest sequence number under the lock's path; every
 * waiter created its node later, so with a higher zxid, and so does anyone
 * who arrives while the lock is held. When the holder's node goes (a release,
 * or its session expiring while its process is paused), the next holder is
 * the lowest of nodes all created after it. The sequence number itself is
 * not a token: it restarts when the lock's parent node is deleted (Curator
 * creates it as a container node, which the server removes when empty).
 *
 * <p>Not for sharing between threads that acquire it: each thread that holds
 * it reads its own node's token.
 */
public final class FencedMutex {
    private final CuratorFramework client;
    private final InterProcessMutex mutex;
    private final Capture driver = new Capture();

    public FencedMutex(CuratorFramework client, String path) {
        this.client = client;
        this.mutex = new InterProcessMutex(client, path, driver);
    }

    /** Waits for the lock; its fencing token. */
    public long acquire() throws Exception {
        mutex.acquire();
        return token();
    }

    /**
     * The fencing token of the lock this thread holds.
     *
     * @throws IllegalStateException when the node is gone (the session expired: the lock is lost)
     */
    public long token() throws Exception {
        String node = driver.node.get();
        if (node == null) {
            throw new IllegalStateException("this thread has not acquired the lock");
        }
        Stat stat = client.checkExists().forPath(node);
        if (stat == null) {
            throw new IllegalStateException("the lock node " + node + " is gone: the session expired and the lock is lost");
        }
        return stat.getCzxid();
    }

    /** The path of the lock node this thread's last acquisition created (null before one). */
    public String node() {
        return driver.node.get();
    }

    public void release() throws Exception {
        mutex.release();
    }

    /** Remembers the node each thread's acquisition created. */
    private static final class Capture extends StandardLockInternalsDriver {
        final ThreadLocal<String> node = new ThreadLocal<>();

        @Override
        public String createsTheLock(CuratorFramework client, String path, byte[] lockNodeBytes) throws Exception {
            String created = super.createsTheLock(client, path, lockNodeBytes);
            node.set(created);
            return created;
        }
    }
}
