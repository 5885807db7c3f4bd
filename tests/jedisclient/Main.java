// Main -- Jedis' Sentinel pool (JedisSentinelPool) against Nic-KV, for
// tests/integration/nickv-jedis.tcl.
//
//   java Main <nic-kv port> <list key> <stop file> [seconds]
//
// Asks Nic-KV for the master named mymaster, as Jedis does with Sentinel,
// and appends 0, 1, 2, ... to <list key> there, each append followed by
// WAIT 1 1000: an append WAIT saw on a replica is one the application was
// told is safe, so the test checks that no failover loses it. One line per
// acknowledged append, naming the port the append went to (the address of
// the pool's connection, not what Nic-KV says now: the test wants where the
// write landed):
//
//   acked <i> <port>
//   error <i> <the exception>
//
// An error (the master killed, a connection refused) is what an
// application retries: it sleeps 10 ms and goes on with the next value, and
// the pool, told by Nic-KV's +switch-master, hands out connections to the
// new master. Once <stop file> exists it prints every acknowledged value:
//
//   done <i> <i> ...
//
// and exits 0. After [seconds] (60) without a stop file it exits 1, so a
// failed test leaves no writer behind.

import java.io.File;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisSentinelPool;

public class Main {
    // Jedis 8 deprecates JedisSentinelPool for its newer client classes; the
    // pool is what most Jedis applications in the field use with Sentinel.
    @SuppressWarnings("deprecation")
    public static void main(String[] args) throws InterruptedException {
        if (args.length < 3) {
            System.err.println("usage: Main <nic-kv port> <list key> <stop file> [seconds]");
            System.exit(2);
        }
        String sentinel = "127.0.0.1:" + Integer.parseInt(args[0]);
        String key = args[1];
        File stop = new File(args[2]);
        long seconds = args.length > 3 ? Long.parseLong(args[3]) : 60;
        long deadline = System.nanoTime() + seconds * 1_000_000_000L;

        List<Integer> acked = new ArrayList<>();
        try (JedisSentinelPool pool = new JedisSentinelPool("mymaster", Set.of(sentinel))) {
            for (int i = 0; !stop.exists(); i++) {
                if (System.nanoTime() > deadline) {
                    System.out.println("timeout: no stop file after " + seconds + " s");
                    System.exit(1);
                }
                try (Jedis jedis = pool.getResource()) {
                    jedis.rpush(key, Integer.toString(i));
                    if (jedis.waitReplicas(1, 1000) >= 1) {
                        acked.add(i);
                        System.out.println("acked " + i + " " + jedis.getConnection().getHostAndPort().getPort());
                    }
                } catch (RuntimeException e) {
                    // JedisException and its kin: the pool drops a broken
                    // connection when it is closed above.
                    System.out.println("error " + i + " " + e);
                    Thread.sleep(10);
                }
            }
        }
        StringBuilder done = new StringBuilder("done");
        for (int v : acked) done.append(' ').append(v);
        System.out.println(done);
    }
}
