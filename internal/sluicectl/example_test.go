package sluicectl_test

import (
	"context"
	"os"

	"github.com/sluicehq/sluice/internal/sluicectl"
)

// Run is the whole command: here it hashes a key for the configuration's
// api_keys, which needs no server.
func ExampleRun() {
	code := sluicectl.Run(context.Background(), []string{"hash-key", "acme-local-key"},
		sluicectl.Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	if code != 0 {
		os.Exit(code)
	}
	// Output: sha256:0beb68a097fbfa5408f30ff65d1aa52def9ec834b229a9ba13e1d1a3822cd124
}
