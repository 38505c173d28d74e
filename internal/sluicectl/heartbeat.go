package sluicectl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/client"
)

// schedule holds submit's --delay, --not-before and --heartbeat.
type schedule struct {
	delay, heartbeat *time.Duration
	notBefore        *string
	at               *time.Time
}

// scheduleFlags adds submit's scheduling and heartbeat flags to fs.
func scheduleFlags(fs *flag.FlagSet) *schedule {
	return &schedule{
		delay:     fs.Duration("delay", 0, "schedule the job this long from now (not with --not-before)"),
		notBefore: fs.String("not-before", "", "schedule the job for this RFC 3339 time (not with --delay)"),
		heartbeat: fs.Duration("heartbeat", 0, "make it a heartbeat job: dropped unless polled (jobs heartbeat ID, or job ID) this often, 1s..24h"),
	}
}

// check refuses --delay with --not-before and a malformed time.
func (s *schedule) check() error {
	if *s.notBefore == "" {
		return nil
	}
	if *s.delay != 0 {
		return usagef("give --delay or --not-before, not both")
	}
	t, err := time.Parse(time.RFC3339Nano, *s.notBefore)
	if err != nil {
		return usagef("--not-before must be an RFC 3339 time such as 2026-01-02T15:04:05Z (got %q)", *s.notBefore)
	}
	s.at = &t
	return nil
}

// apply sets the flags on j.
func (s *schedule) apply(j *client.Job) {
	j.Delay, j.Heartbeat, j.NotBefore = *s.delay, *s.heartbeat, s.at
}

// printTiming prints a job's due time and heartbeat, when it has them.
func printTiming(w io.Writer, js client.JobStatus) {
	if js.DueAt != nil {
		fmt.Fprintf(w, "due\t%s\n", js.DueAt.Format(time.RFC3339Nano))
	}
	if hb := js.Heartbeat; hb != nil {
		fmt.Fprintf(w, "heartbeat\tevery %s, last %s, expires %s\n", hb.Interval,
			hb.LastBeat.Format(time.RFC3339Nano), hb.ExpiresAt.Format(time.RFC3339Nano))
	}
}

// jobsHeartbeat polls a heartbeat job (POST /v1/jobs/{id}:heartbeat) and
// prints "<id> <state> expires <time>".
func (c *cmd) jobsHeartbeat(ctx context.Context, args []string) error {
	fs := c.flags("heartbeat", "ID [--tenant T]")
	tenant := fs.String("tenant", "", "the job's tenant, with an admin token (default: looked up in every tenant)")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	var js client.JobStatus
	switch {
	case c.g.key != "":
		cl, _ := c.tenantClient()
		js, err = cl.Heartbeat(ctx, pos[0])
	case c.g.adminToken != "":
		a, _ := c.admin()
		js, err = a.Heartbeat(ctx, *tenant, pos[0])
	default:
		return usagef("needs a tenant key (--key, SLUICE_KEY) or an admin token (--admin-token, SLUICE_ADMIN_TOKEN)")
	}
	if err != nil {
		return err
	}
	exp := ""
	if js.Heartbeat != nil {
		exp = " expires " + js.Heartbeat.ExpiresAt.Format(time.RFC3339Nano)
	}
	fmt.Fprintf(c.env.Stdout, "%s %s%s\n", pos[0], js.State, exp)
	return nil
}
