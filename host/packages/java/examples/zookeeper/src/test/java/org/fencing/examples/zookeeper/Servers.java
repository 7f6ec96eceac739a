package org.fencing.examples.zookeeper;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * Throwaway servers on 127.0.0.1: ZooKeeper from Debian's {@code zookeeper}
 * package (a standalone server, tick 500 ms, so sessions of 1 to 10 s), and
 * PostgreSQL 15 with the fencing extension (scripts/pg-extension install),
 * run as the postgres user when the test runs as root. Without them the
 * tests are skipped, unless FENCING_REQUIRE_SERVERS is set, when they fail.
 */
final class Servers implements AutoCloseable {
    private final List<Process> processes = new ArrayList<>();

    static void missing(String what) {
        if (System.getenv("FENCING_REQUIRE_SERVERS") != null) {
            throw new IllegalStateException(what + " (FENCING_REQUIRE_SERVERS is set)");
        }
        Assumptions.abort(what);
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private Process zooKeeper;
    private int zooKeeperPort;
    private Path zooKeeperDir;

    /** A ZooKeeper server in {@code dir}: its connect string. */
    String zooKeeper(Path dir) throws Exception {
        Path jar = Path.of(System.getenv().getOrDefault("FENCING_ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar"));
        if (!Files.exists(jar)) {
            missing("ZooKeeper is not installed (apt install zookeeper)");
        }
        zooKeeperPort = freePort();
        zooKeeperDir = dir;
        return startZooKeeper(jar);
    }

    /** Kills the ZooKeeper server (SIGKILL) and starts it again on the same data and port. */
    void restartZooKeeper() throws Exception {
        zooKeeper.destroyForcibly().waitFor();
        startZooKeeper(Path.of(System.getenv().getOrDefault("FENCING_ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar")));
    }

    private String startZooKeeper(Path jar) throws Exception {
        int port = zooKeeperPort;
        Path dir = zooKeeperDir;
        Process zk = new ProcessBuilder("java", "-cp", jar.toString(), "org.apache.zookeeper.server.ZooKeeperServerMain",
                        String.valueOf(port), dir.resolve("zookeeper").toString(), "500")
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("zookeeper.log").toFile()))
                .start();
        processes.add(zk);
        zooKeeper = zk;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            try {
                new java.net.Socket("127.0.0.1", port).close();
                return "127.0.0.1:" + port;
            } catch (IOException e) {
                if (!zk.isAlive() || System.nanoTime() > deadline) {
                    throw new IllegalStateException("ZooKeeper did not start: " + Files.readString(dir.resolve("zookeeper.log")));
                }
                Thread.sleep(100);
            }
        }
    }

    /** PostgreSQL 15 in {@code dir} with the fencing extension created: a connection. */
    Connection postgres(Path dir) throws Exception {
        Path bin = Path.of(System.getenv().getOrDefault("FENCING_PG_BIN", "/usr/lib/postgresql/15/bin"));
        if (!Files.exists(bin.resolve("initdb"))) {
            missing("PostgreSQL 15 is not installed");
        }
        List<String> runAs = new ArrayList<>();
        if ("root".equals(System.getProperty("user.name"))) {
            runAs = List.of("runuser", "-u", "postgres", "--");
            run(List.of("chown", "postgres", dir.toString()));
        }
        Path data = dir.resolve("data");
        List<String> initdb = new ArrayList<>(runAs);
        initdb.addAll(List.of(bin.resolve("initdb").toString(), "-A", "trust", "-U", "fencing", "-E", "UTF8", "--no-locale", "-D", data.toString()));
        run(initdb);
        int port = freePort();
        List<String> postgres = new ArrayList<>(runAs);
        postgres.addAll(List.of(bin.resolve("postgres").toString(), "-D", data.toString(), "-p", String.valueOf(port),
                "-c", "listen_addresses=127.0.0.1", "-k", dir.toString()));
        Process pg = new ProcessBuilder(postgres).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        processes.add(pg);
        String url = "jdbc:postgresql://127.0.0.1:" + port + "/postgres?user=fencing";
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            try {
                Connection c = DriverManager.getConnection(url);
                try {
                    c.createStatement().execute("CREATE EXTENSION fencing");
                } catch (SQLException e) {
                    c.close();
                    if (e.getMessage().contains("is not available")) {
                        missing("the fencing extension is not installed (scripts/pg-extension install)");
                    }
                    throw e;
                }
                return c;
            } catch (SQLException e) {
                if (!pg.isAlive() || System.nanoTime() > deadline || e.getMessage().contains("fencing")) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }

    private static void run(List<String> command) throws Exception {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (p.waitFor() != 0) {
            throw new IllegalStateException(String.join(" ", command) + " failed: " + out);
        }
    }

    @Override
    public void close() {
        for (Process p : processes) {
            p.destroyForcibly();
        }
    }
}
