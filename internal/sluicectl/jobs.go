package sluicectl

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/config"
)

// stats prints one tenant's backlog, outflow rates, water level, jobs in
// flight, dead jobs and drain ETA.
func (c *cmd) stats(ctx context.Context, args []string) error {
	fs := c.flags("", "TENANT [--json]")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	cl, err := c.viewer()
	if err != nil {
		return err
	}
	st, err := cl.Stats(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(st)
	}
	o := st.Outflow
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "tenant\t%s\n", st.Tenant)
	if st.Paused {
		fmt.Fprintf(tw, "paused\tyes: no delivery starts; jobs are still admitted (sluicectl resume %s)\n", st.Tenant)
	}
	drains := eta(st.ETASeconds)
	if st.Paused {
		drains += " once resumed"
	}
	fmt.Fprintf(tw, "backlog\t%d (drains in %s)\n", st.Backlog, drains)
	fmt.Fprintf(tw, "admission\tadmitted %s/s, refused %s/s (last 10 s)\n", rate(st.Admission.AdmittedRate), rate(st.Admission.RefusedRate))
	fmt.Fprintf(tw, "outflow\tconfigured %s/s, effective %s/s, measured %s/s (last 10 s)\n",
		rate(o.ConfiguredRate), rate(o.EffectiveRate), rate(o.MeasuredRate))
	fmt.Fprintf(tw, "water level\t%s of %s\n", fixed1(st.WaterLevel), num(o.Capacity))
	fmt.Fprintf(tw, "in flight\t%d\n", st.InFlight)
	fmt.Fprintf(tw, "dead (DLQ)\t%d\n", st.DLQ)
	return tw.Flush()
}

// job prints one job's state.
func (c *cmd) job(ctx context.Context, args []string) error {
	fs := c.flags("", "ID [--tenant T] [--json]")
	tenant := fs.String("tenant", "", "the job's tenant, with an admin token (default: looked up in every tenant)")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	js, err := c.jobCall(ctx, *tenant, pos[0], false)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(js)
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "job\t%s\n", js.JobID)
	fmt.Fprintf(tw, "tenant\t%s\n", js.Tenant)
	fmt.Fprintf(tw, "type\t%s\n", js.Type)
	fmt.Fprintf(tw, "state\t%s\n", js.State)
	if js.Position != nil {
		fmt.Fprintf(tw, "position\t%d ahead\n", *js.Position)
	}
	if js.ETASeconds != nil {
		fmt.Fprintf(tw, "eta\t%s\n", eta(js.ETASeconds))
	}
	fmt.Fprintf(tw, "attempt\t%d\n", js.Attempt)
	if !js.EnqueuedAt.IsZero() {
		fmt.Fprintf(tw, "enqueued\t%s\n", js.EnqueuedAt.Format(time.RFC3339Nano))
	}
	if !js.UpdatedAt.IsZero() {
		fmt.Fprintf(tw, "updated\t%s\n", js.UpdatedAt.Format(time.RFC3339Nano))
	}
	if js.LastError != "" {
		fmt.Fprintf(tw, "last error\t%s\n", js.LastError)
	}
	printTiming(tw, js)
	return tw.Flush()
}

// cancel cancels a waiting (queued or retrying) job.
func (c *cmd) cancel(ctx context.Context, args []string) error {
	fs := c.flags("", "ID [--tenant T]")
	tenant := fs.String("tenant", "", "the job's tenant, with an admin token (default: looked up in every tenant)")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	js, err := c.jobCall(ctx, *tenant, pos[0], true)
	if err != nil {
		return err
	}
	state := js.State
	if state == "" {
		state = client.StateCancelled
	}
	fmt.Fprintf(c.env.Stdout, "%s %s\n", pos[0], state)
	return nil
}

// jobCall gets (or with cancel, cancels) job id: with the tenant key when
// one is given (a job id belongs to its tenant), otherwise with the admin
// token and tenant ("" lets the server look the id up).
func (c *cmd) jobCall(ctx context.Context, tenant, id string, cancel bool) (client.JobStatus, error) {
	if c.g.key != "" {
		cl, _ := c.tenantClient()
		if cancel {
			return cl.Cancel(ctx, id)
		}
		return cl.Job(ctx, id)
	}
	if c.g.adminToken == "" {
		return client.JobStatus{}, usagef("needs a tenant key (--key, SLUICE_KEY) or an admin token (--admin-token, SLUICE_ADMIN_TOKEN)")
	}
	a, _ := c.admin()
	if cancel {
		return a.Cancel(ctx, tenant, id)
	}
	return a.Job(ctx, tenant, id)
}

// hashKey prints the stored form of a key for the configuration's api_keys
// or ingest.admin_tokens; "-" reads the key from the first line of stdin, so
// it stays out of the shell's history.
func (c *cmd) hashKey(_ context.Context, args []string) error {
	fs := c.flags("", "KEY|-")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	key := pos[0]
	if key == "-" {
		line, err := bufio.NewReader(c.env.Stdin).ReadString('\n')
		if err != nil && line == "" {
			return usagef("no key on stdin")
		}
		key = strings.TrimRight(line, "\r\n")
	}
	if key == "" {
		return usagef("the key is empty")
	}
	fmt.Fprintln(c.env.Stdout, config.HashKey(key))
	return nil
}
