package sluicectl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/client"
)

// submit sends --count jobs of --type as the --key tenant, one request each
// (or one batch with --batch), and prints "<job_id> <enqueued_at>" per
// accepted job. Refusals that may pass later (429, 503) are printed and the
// next job is tried; any other error stops. The exit code is 1 when a job
// was not accepted.
func (c *cmd) submit(ctx context.Context, args []string) error {
	fs := c.flags("", "--type T [--payload JSON|@file|@-] [--cost N] [--id ID] [--count N] [--batch] [--tries N] [--delay D | --not-before T] [--heartbeat D]")
	typ := fs.String("type", "", "job type (required)")
	payload := fs.String("payload", "", "job payload: JSON, @file, or @- for stdin")
	cost := fs.Int64("cost", 0, "units of the tenant's limits the job uses (server default 1)")
	id := fs.String("id", "", "client job id, for deduplication (with --count N: ID-1 ... ID-N)")
	count := fs.Int("count", 1, "number of jobs to submit")
	batch := fs.Bool("batch", false, "submit the jobs as one POST /v1/jobs:batch (admitted as one request of cost N)")
	tries := fs.Int("tries", 5, "tries per request; 429 and 503 are retried after Retry-After, else with backoff")
	deadline := fs.Duration("deadline", 0, "drop the job when not delivered within this time (0: never)")
	sch := scheduleFlags(fs)
	if _, err := c.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if err := sch.check(); err != nil {
		return err
	}
	if *typ == "" {
		return usagef("--type is required")
	}
	if *count < 1 {
		return usagef("--count must be >= 1 (got %d)", *count)
	}
	raw, err := c.payloadArg(*payload)
	if err != nil {
		return err
	}
	cl, err := c.tenantClient(client.WithMaxTries(*tries))
	if err != nil {
		return err
	}
	jobs := make([]client.Job, *count)
	for i := range jobs {
		jobs[i] = client.Job{Type: *typ, Payload: raw, Cost: *cost, ID: *id}
		if *id != "" && *count > 1 {
			jobs[i].ID = fmt.Sprintf("%s-%d", *id, i+1)
		}
		if *deadline > 0 {
			d := c.env.Clock.Now().Add(*deadline)
			jobs[i].Deadline = &d
		}
		sch.apply(&jobs[i])
	}
	if *batch {
		accs, err := cl.SubmitBatch(ctx, jobs)
		if err != nil {
			return err
		}
		for _, a := range accs {
			c.printAccepted(a)
		}
		return nil
	}
	return c.submitEach(ctx, cl, jobs)
}

// payloadArg reads --payload (JSON, @file or @-; "" is none) and checks it
// is JSON.
func (c *cmd) payloadArg(arg string) (json.RawMessage, error) {
	if arg == "" {
		return nil, nil
	}
	b, err := c.readArg(arg)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, usagef("--payload is not valid JSON")
	}
	return b, nil
}

// submitEach submits jobs one by one and sums up when there is more than one.
func (c *cmd) submitEach(ctx context.Context, cl *client.Client, jobs []client.Job) error {
	accepted, refused := 0, 0
	var last *client.Error
	for _, j := range jobs {
		a, err := cl.Submit(ctx, j)
		var apiErr *client.Error
		switch {
		case err == nil:
			accepted++
			c.printAccepted(a)
			continue
		case errors.As(err, &apiErr) && apiErr.Temporary() && len(jobs) > 1:
			refused++
			last = apiErr
			fmt.Fprintf(c.env.Stderr, "refused: %s\n", describe(apiErr))
			continue
		}
		if len(jobs) > 1 {
			fmt.Fprintf(c.env.Stderr, "%d accepted, %d refused, stopped at job %d\n", accepted, refused, accepted+refused+1)
		}
		return err
	}
	if len(jobs) > 1 {
		fmt.Fprintf(c.env.Stderr, "%d accepted, %d refused\n", accepted, refused)
	}
	if refused > 0 {
		return fmt.Errorf("%d of %d jobs refused; the last: %s", refused, len(jobs), describe(last))
	}
	return nil
}

// printAccepted prints "<job_id> <enqueued_at>", and for a scheduled job
// " due <due_at>".
func (c *cmd) printAccepted(a client.Accepted) {
	due := ""
	if a.DueAt != nil {
		due = " due " + a.DueAt.Format(time.RFC3339Nano)
	}
	fmt.Fprintf(c.env.Stdout, "%s %s%s\n", a.JobID, a.EnqueuedAt.Format(time.RFC3339Nano), due)
}
