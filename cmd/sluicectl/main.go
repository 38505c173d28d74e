// Command sluicectl is the command line of sluice's job, admin and
// visibility APIs: submit jobs, manage tenants, read stats and job states,
// watch every tenant live with top, and hash keys for the configuration.
//
//	sluicectl --key acme-local-key submit --type email --payload '{"to":"a@example.com"}'
//	sluicectl --admin-token local-admin tenants set acme --rate 20 --capacity 20
//	sluicectl --admin-token local-admin top
//
// `sluicectl help` lists every command; internal/sluicectl holds the logic.
// Exit codes: 0 on success, 1 when a request failed, 2 on bad usage.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/internal/sluicectl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := sluicectl.Run(ctx, os.Args[1:], sluicectl.Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
	})
	stop()
	os.Exit(code)
}
