package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/agent-worker/agent-worker/store/redisstore"
)

// Open a store on the master three Sentinels watch, with the master's
// password in $REDIS_PASSWORD rather than in the URL. (Not run: it needs
// those servers.)
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.Open(ctx, "redis+sentinel://sentinel-0:26379,sentinel-1:26379,sentinel-2:26379/mymaster/0",
		redisstore.Options{
			Prefix:      "agent-worker-prod:",
			PasswordEnv: "REDIS_PASSWORD",
			Log:         slog.Default(),
		})
	if err != nil {
		log.Fatal(err) // redisstore: open: redis master "mymaster" via sentinel ...: ...
	}
	defer func() { _ = s.Close() }()

	// A claim only one replica wins, for a minute.
	if _, err := s.Create(ctx, "lease.oncall", []byte("replica-a"), time.Minute); err != nil {
		fmt.Println("held elsewhere:", err)
	}
}
