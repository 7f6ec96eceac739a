package org.fencing.examples.zookeeper;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;
import org.fencing.guard.Decision;
import org.fencing.guard.Fence;
import org.fencing.guard.Guard;
import org.fencing.guard.Policy;
import org.fencing.guard.Sequencer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A holder of a ZooKeeper lock stops heart-beating until its session
 * expires (as a process paused in GC would); a second client takes the lock
 * and writes; the first wakes and writes with its old token. The Java guard
 * refuses it, a PostgreSQL table under fencing.protect refuses it over JDBC
 * (FN001, mapped to {@link FenceRefusedException}), and the row keeps the
 * second holder's write.
 */
class PausedHolderTest {
    private static final String LOCK = "/locks/orders";

    private static CuratorFramework client(String connect, int sessionMs) {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(5000)
                .retryPolicy(new RetryOneTime(100))
                .build();
        c.start();
        return c;
    }

    private static void upsert(Connection db, long token, String body) throws SQLException, FenceRefusedException {
        try (PreparedStatement s = db.prepareStatement("INSERT INTO orders VALUES ('orders-1', ?, ?)"
                + " ON CONFLICT (id) DO UPDATE SET body = excluded.body, token = excluded.token")) {
            s.setString(1, body);
            s.setLong(2, token);
            s.executeUpdate();
        } catch (SQLException e) {
            throw FenceRefusedException.of(e).orElseThrow(() -> e);
        }
    }

    private static long sequence(String node) {
        return Long.parseLong(node.substring(node.length() - 10));
    }

    @Test
    void aPausedHoldersLateWriteIsRefusedByTheGuardAndByPostgres(@TempDir Path dir) throws Exception {
        try (Servers servers = new Servers();
                Guard guard = new Guard()) {
            String zk = servers.zooKeeper(dir);
            Path pgDir = java.nio.file.Files.createTempDirectory("fencing-java-pg-");
            try (Connection db = servers.postgres(pgDir)) {
                db.createStatement().execute("CREATE TABLE orders (id text PRIMARY KEY, body text, token bigint)");
                db.createStatement().execute("SELECT fencing.protect('orders', 'id', 'token')");

                CuratorFramework first = client(zk, 2000);
                FencedMutex lockA = new FencedMutex(first, LOCK);
                long tokenA = lockA.acquire();
                Fence fence = null;
                Decision d = guard.admit(fence, new Sequencer(LOCK, tokenA), Policy.NON_DECREASING);
                assertTrue(d.admitted(), d.toString());
                fence = new Fence(LOCK, tokenA);
                upsert(db, tokenA, "A");

                // The first holder goes silent: its session expires on the server, its node with it.
                first.getZookeeperClient().getZooKeeper().getTestable().injectSessionExpiration();
                CuratorFramework second = client(zk, 10000);
                FencedMutex lockB = new FencedMutex(second, LOCK);
                long tokenB = lockB.acquire();
                assertTrue(tokenB > tokenA, "the second holder's token " + tokenB + " is above the first's " + tokenA);
                d = guard.admit(fence, new Sequencer(LOCK, tokenB), Policy.NON_DECREASING);
                assertTrue(d instanceof Decision.Admitted a && a.newTerm(), d.toString());
                fence = new Fence(LOCK, tokenB);
                upsert(db, tokenB, "B");

                // It wakes, and writes with the token it still has.
                assertThrows(IllegalStateException.class, lockA::token, "its node is gone");
                assertEquals(new Decision.StaleToken(tokenA, tokenB), guard.admit(fence, new Sequencer(LOCK, tokenA), Policy.NON_DECREASING));
                FenceRefusedException refused = assertThrows(FenceRefusedException.class, () -> upsert(db, tokenA, "late"));
                assertEquals("stale_token", refused.reason());
                assertEquals("FN001", refused.sqlState());
                try (ResultSet row = db.createStatement().executeQuery("SELECT body, token FROM orders WHERE id = 'orders-1'")) {
                    assertTrue(row.next());
                    assertEquals("B", row.getString(1));
                    assertEquals(tokenB, row.getLong(2));
                }
                System.out.printf("zookeeper: paused holder czxid 0x%x, new holder 0x%x; the late write refused by the guard"
                        + " (stale_token) and by PostgreSQL (%s)%n", tokenA, tokenB, refused.sqlState());
                lockB.release();
                second.close();
                first.close();

                // The lock's parent goes (as a container node does once empty) and the
                // server restarts (SIGKILL): the next node's sequence starts again, its czxid does not.
                CuratorFramework admin = client(zk, 10000);
                String seqB = lockB.node();
                admin.delete().forPath(LOCK);
                admin.close();
                servers.restartZooKeeper();
                CuratorFramework third = client(zk, 10000);
                FencedMutex lockC = new FencedMutex(third, LOCK);
                long tokenC = lockC.acquire();
                String seqC = lockC.node();
                assertTrue(tokenC > tokenB, "after a parent delete and a restart: czxid 0x" + Long.toHexString(tokenC)
                        + " above 0x" + Long.toHexString(tokenB));
                assertTrue(sequence(seqC) <= sequence(seqB), "the sequence number started again: " + seqC + " after " + seqB);
                assertEquals(new Decision.StaleToken(tokenB, tokenC),
                        guard.admit(new Fence(LOCK, tokenC), new Sequencer(LOCK, tokenB), Policy.NON_DECREASING));
                System.out.printf("zookeeper: after the parent was deleted and the server restarted: czxid 0x%x (sequence %d,"
                        + " was %d)%n", tokenC, sequence(seqC), sequence(seqB));
                lockC.release();
                third.close();
            } finally {
                new ProcessBuilder("rm", "-rf", pgDir.toString()).start().waitFor();
            }
        }
    }
}
