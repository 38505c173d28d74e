// Package sluicectl is the logic of the sluicectl command: a command line
// for sluice's job, admin and visibility APIs built on the client package.
//
//	sluicectl [global flags] <command> [flags] [args]
//
//	submit --type T [--payload JSON|@file|@-] [--cost N] [--id ID] [--count N] [--batch]
//	tenants list | get ID | set ID (--file spec.json | --rate R --limit L ...) | delete ID | audit ID [--limit N] [--cursor C | --all]
//	stats TENANT
//	job ID [--tenant T]
//	cancel ID [--tenant T]
//	jobs list --state S [--tenant T] [--limit N] [--cursor C | --all]
//	purge TENANT
//	top [--interval 1s] [--frames N] [TENANT...]
//	pause TENANT | resume TENANT
//	dlq list TENANT [--limit N] [--cursor C] | show TENANT ID | redrive TENANT ID...|--all | delete TENANT ID...|--all
//	hash-key KEY|-
//
// Global flags, each with an environment variable as its default: --url
// (SLUICE_URL, default http://127.0.0.1:8080), --key (SLUICE_KEY, a tenant
// key: submit, job, cancel, and stats/top of that tenant) and --admin-token
// (SLUICE_ADMIN_TOKEN: tenants, and stats/top of any tenant). They may come
// before or after the command. Exit codes: 0 on success, 1 when a request
// failed (the server's problem detail and field are printed), 2 on bad usage.
package sluicectl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/clock"
)

// Env is what a run of sluicectl reads and writes.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads SLUICE_URL, SLUICE_KEY and SLUICE_ADMIN_TOKEN
	// (default: none set).
	Getenv func(string) string
	// Clock is the time of top's frames and of submit's --deadline
	// (default clock.Real).
	Clock clock.Clock
	// HTTP, when set, is the HTTP client of every request (default: one
	// with a 30 s timeout).
	HTTP *http.Client
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// DefaultURL is the ingest address used when neither --url nor SLUICE_URL
// is given.
const DefaultURL = "http://127.0.0.1:8080"

// globals are the flags every command takes.
type globals struct {
	url, key, adminToken string
}

// register adds the global flags to fs; flags left empty take their
// environment variable's value in resolve.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.url, "url", g.url, "ingest base URL (env SLUICE_URL, default "+DefaultURL+")")
	fs.StringVar(&g.key, "key", g.key, "tenant API key (env SLUICE_KEY)")
	fs.StringVar(&g.adminToken, "admin-token", g.adminToken, "admin token (env SLUICE_ADMIN_TOKEN)")
}

func (g *globals) resolve(getenv func(string) string) {
	pick := func(v *string, name, def string) {
		if *v == "" {
			*v = getenv(name)
		}
		if *v == "" {
			*v = def
		}
	}
	pick(&g.url, "SLUICE_URL", DefaultURL)
	pick(&g.key, "SLUICE_KEY", "")
	pick(&g.adminToken, "SLUICE_ADMIN_TOKEN", "")
	g.url = strings.TrimRight(g.url, "/")
}

// cmd is one run: the environment, the global flags and the command's name.
type cmd struct {
	env  Env
	g    globals
	name string
}

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// Run runs sluicectl with args (without the program name) and returns the
// exit code. ctx ends a long-running command (top) and any request.
func Run(ctx context.Context, args []string, env Env) int {
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	env.Clock = clock.Or(env.Clock)
	c := &cmd{env: env}
	fs := flag.NewFlagSet("sluicectl", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	c.g.register(fs)
	fs.Usage = func() { fmt.Fprint(env.Stderr, usageText); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	c.name = fs.Arg(0)
	run, ok := commands[c.name]
	if !ok {
		fmt.Fprintf(env.Stderr, "sluicectl: unknown command %q\n", c.name)
		fs.Usage()
		return exitUsage
	}
	err := run(c, ctx, fs.Args()[1:])
	return c.report(err)
}

// commands maps a command name to its function; each parses its own args.
var commands map[string]func(*cmd, context.Context, []string) error

func init() {
	commands = map[string]func(*cmd, context.Context, []string) error{
		"submit":   (*cmd).submit,
		"tenants":  (*cmd).tenants,
		"stats":    (*cmd).stats,
		"job":      (*cmd).job,
		"cancel":   (*cmd).cancel,
		"jobs":     (*cmd).jobs,
		"purge":    (*cmd).purge,
		"top":      (*cmd).top,
		"pause":    (*cmd).pause,
		"resume":   (*cmd).resume,
		"hash-key": (*cmd).hashKey,
		"dlq":      (*cmd).dlq,
		"help": func(*cmd, context.Context, []string) error {
			return errHelp
		},
	}
}

var errHelp = errors.New("help")

const usageText = `sluicectl: the command line of sluice's job, admin and visibility APIs.

Usage: sluicectl [global flags] <command> [flags] [args]

Commands:
  submit --type T [--payload JSON|@file|@-] [--cost N] [--id ID] [--count N] [--batch] [--tries N]
         [--delay D | --not-before T] [--heartbeat D]
                       submit jobs as the --key tenant (scheduled: --delay/--not-before;
                       heartbeat jobs: --heartbeat, kept while polled)
  tenants list         every tenant (admin token)
  tenants get ID       one tenant's spec
  tenants set ID --file spec.json|-        create or replace a tenant (PUT)
  tenants set ID --rate R --limit L ...    change some keys (JSON merge patch);
                       sluicectl tenants set -h lists them
  tenants delete ID    remove a runtime tenant
  tenants audit ID [--limit N] [--cursor C | --all]
                       who changed what, newest first, a page at a time (--all: every page)
  stats TENANT         backlog, admitted/refused per s, outflow (configured/effective/measured), water level, ETA, paused
  job ID [--tenant T]  a job's state, queue position and ETA (--tenant: with an admin token)
  cancel ID [--tenant T]
                       cancel a waiting (queued, retrying or scheduled) job
  jobs list --state S [--tenant T] [--limit N] [--cursor C | --all]
                       a tenant's jobs in one state: queued (positions, ETAs), scheduled,
                       in_flight, retrying, dead or done (the last hour), a page at a time
  purge TENANT         cancel every waiting job of a tenant (admin token); jobs in flight finish
  jobs heartbeat ID [--tenant T]
                       poll a heartbeat job, keeping it wanted
  top [--interval 1s] [--frames N] [TENANT...]
                       live view of every tenant (admin token) or of the given ones; q quits
  pause TENANT         stop delivery (in-flight jobs finish; jobs are still admitted)
  resume TENANT        deliver again, at the outflow rate
  dlq list TENANT [--limit N] [--cursor C]
                       a tenant's dead jobs, newest first (admin token)
  dlq show TENANT ID   one dead job with its payload and the sink's last response
  dlq redrive TENANT ID...|--all
                       put dead jobs back on the tenant's queue (same id, attempts reset)
  dlq delete TENANT ID...|--all
                       delete dead letters
  hash-key KEY|-       the sha256:<hex> form of an API key or admin token for the config

Exit codes: 0 ok, 1 a request failed, 2 bad usage.

Global flags (also after the command):
`

// report prints err the way a user needs it and returns the exit code.
func (c *cmd) report(err error) int {
	var ue usageError
	var apiErr *client.Error
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		fmt.Fprint(c.env.Stderr, usageText)
		fs := flag.NewFlagSet("sluicectl", flag.ContinueOnError)
		fs.SetOutput(c.env.Stderr)
		(&globals{}).register(fs)
		fs.PrintDefaults()
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(c.env.Stderr, "sluicectl %s: %s (see sluicectl %s -h)\n", c.name, ue.msg, c.name)
		return exitUsage
	case errors.As(err, &apiErr):
		fmt.Fprintf(c.env.Stderr, "sluicectl %s: %s\n", c.name, describe(apiErr))
		return exitFail
	default:
		fmt.Fprintf(c.env.Stderr, "sluicectl %s: %v\n", c.name, err)
		return exitFail
	}
}

// describe renders a server's problem answer on one line: status, title,
// detail, and the field at fault and the wait when given.
func describe(e *client.Error) string {
	s := fmt.Sprintf("%d %s", e.Status, e.Title)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Field != "" {
		s += " [field " + e.Field + "]"
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	if e.Tries > 1 {
		s += fmt.Sprintf(" after %d tries", e.Tries)
	}
	return s
}

// flags returns a FlagSet for the command (sub is its sub-command, if any)
// that also takes the global flags.
func (c *cmd) flags(sub, usage string) *flag.FlagSet {
	name := "sluicectl " + c.name
	if sub != "" {
		name += " " + sub
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.env.Stderr)
	c.g.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(c.env.Stderr, "Usage: %s %s\n\nFlags:\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args with fs, letting flags and positional arguments mix
// ("tenants set acme --rate 5" as well as "--rate 5 acme"); everything after
// "--" is positional. It checks the positional count is within [min, max]
// (max < 0: no bound) and resolves the global flags.
func (c *cmd) parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	c.g.resolve(c.env.Getenv)
	switch {
	case len(pos) < min:
		return nil, usagef("missing argument (want %d, got %d)", min, len(pos))
	case max >= 0 && len(pos) > max:
		return nil, usagef("too many arguments: %q", pos[max:])
	}
	return pos, nil
}

func (c *cmd) options(extra ...client.Option) []client.Option {
	opts := []client.Option{}
	if c.env.HTTP != nil {
		opts = append(opts, client.WithHTTPClient(c.env.HTTP))
	}
	return append(opts, extra...)
}

// tenantClient is a client with the tenant key; it needs one.
func (c *cmd) tenantClient(extra ...client.Option) (*client.Client, error) {
	if c.g.key == "" {
		return nil, usagef("needs a tenant key: --key or SLUICE_KEY")
	}
	return client.New(c.g.url, c.g.key, c.options(extra...)...), nil
}

// admin is a client with the admin token; it needs one.
func (c *cmd) admin(extra ...client.Option) (*client.Admin, error) {
	if c.g.adminToken == "" {
		return nil, usagef("needs an admin token: --admin-token or SLUICE_ADMIN_TOKEN")
	}
	return client.NewAdmin(c.g.url, c.g.adminToken, c.options(extra...)...), nil
}

// viewer is the client of the visibility calls that any tenant's admin may
// make (stats, top): with the admin token when one is given, otherwise with
// the tenant key (which sees its own tenant only).
func (c *cmd) viewer(extra ...client.Option) (*client.Client, error) {
	switch {
	case c.g.adminToken != "":
		return client.New(c.g.url, c.g.adminToken, c.options(extra...)...), nil
	case c.g.key != "":
		return client.New(c.g.url, c.g.key, c.options(extra...)...), nil
	}
	return nil, usagef("needs an admin token (--admin-token, SLUICE_ADMIN_TOKEN) or a tenant key (--key, SLUICE_KEY)")
}

// readArg returns v, or the contents of the file after "@" ("@-": stdin).
func (c *cmd) readArg(v string) ([]byte, error) {
	name, ok := strings.CutPrefix(v, "@")
	if !ok {
		return []byte(v), nil
	}
	return c.readFile(name)
}

// readFile reads a file, "-" being stdin.
func (c *cmd) readFile(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(c.env.Stdin)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}
