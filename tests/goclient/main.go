// nickv-goclient -- go-redis' Sentinel client (FailoverClient) against
// Nic-KV, for tests/integration/nickv-goclient.tcl.
//
// It asks Nic-KV (-sentinel) for the master named -name, as go-redis does
// with Sentinel, and writes SET <prefix>:<i> <i> (in database -db) in a loop, each with
// CLIENT INFO in the same MULTI: the master's reply names the address the
// write went to (laddr) and the protocol of go-redis' connection (resp).
// One line per write:
//
//	wrote <i> <laddr> resp=<2|3>
//	error <i> <what go-redis returned>
//
// and go-redis' own log lines (a new master, a failed discovery) as
// "log: ...". It exits 0 once -after writes went to an address other than
// the first one's (the master after a failover), 1 when -timeout passes
// first.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// go-redis' log, on stdout with the writes, so the test sees the order.
type stdoutLog struct{}

func (stdoutLog) Printf(ctx context.Context, format string, v ...interface{}) {
	fmt.Printf("log: "+format+"\n", v...)
}

// The value of field in a CLIENT INFO line ("" when absent).
func clientField(info, field string) string {
	for _, kv := range strings.Fields(info) {
		if strings.HasPrefix(kv, field+"=") {
			return kv[len(field)+1:]
		}
	}
	return ""
}

func main() {
	sentinel := flag.String("sentinel", "127.0.0.1:26379", "Nic-KV's address")
	name := flag.String("name", "mymaster", "the master's name")
	db := flag.Int("db", 0, "the database to write in")
	prefix := flag.String("prefix", "go", "the keys' prefix")
	after := flag.Int("after", 5, "writes to a second address before exiting")
	timeout := flag.Duration("timeout", 30*time.Second, "give up after this long")
	pause := flag.Duration("pause", 50*time.Millisecond, "time between writes")
	flag.Parse()

	redis.SetLogger(stdoutLog{})
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    *name,
		SentinelAddrs: []string{*sentinel},
		DB:            *db,
		DialTimeout:   time.Second,
		ReadTimeout:   2 * time.Second,
		WriteTimeout:  2 * time.Second,
		MaxRetries:    1,
	})
	defer rdb.Close()

	ctx := context.Background()
	deadline := time.Now().Add(*timeout)
	first, moved := "", 0
	for i := 0; time.Now().Before(deadline); i++ {
		var info *redis.Cmd
		key := fmt.Sprintf("%s:%d", *prefix, i)
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, i, 0)
			info = p.Do(ctx, "CLIENT", "INFO")
			return nil
		})
		if err != nil {
			fmt.Printf("error %d %v\n", i, err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		line := fmt.Sprint(info.Val())
		addr := clientField(line, "laddr")
		fmt.Printf("wrote %d %s resp=%s\n", i, addr, clientField(line, "resp"))
		if first == "" {
			first = addr
		} else if addr != first {
			moved++
			if moved >= *after {
				return
			}
		}
		time.Sleep(*pause)
	}
	fmt.Println("timeout: no writes to a new master")
	os.Exit(1)
}
