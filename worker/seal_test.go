package worker

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/agent-worker/agent-worker/seal"
)

// sharedSealFile is one seal key file for every replica the package's
// tests start: replicas of a deployment share one key (seal.key_file).
var sharedSealFile = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "agent-worker-seal-")
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "seal.key")
	if err := seal.WriteLocal(path, seal.Generate()); err != nil {
		panic(err)
	}
	return path
})

// sealLine is the config line that gives a replica the shared key.
func sealLine() string { return "seal: {key_file: " + strconv.Quote(sharedSealFile()) + "}\n" }
