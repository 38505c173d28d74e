package sluicectl

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/client"
)

// jobs runs "jobs list" (GET /v1/jobs) and "jobs heartbeat"
// (POST /v1/jobs/{id}:heartbeat).
func (c *cmd) jobs(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("missing sub-command: list or heartbeat")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "list", "ls":
		return c.jobsList(ctx, args)
	case "heartbeat":
		return c.jobsHeartbeat(ctx, args)
	}
	return usagef("unknown sub-command %q: want list or heartbeat", sub)
}

// jobsList prints a page of a tenant's jobs in one state, or with --all
// every page.
func (c *cmd) jobsList(ctx context.Context, args []string) error {
	fs := c.flags("list", "--state S [--tenant T] [--limit N] [--cursor C | --all] [--json]")
	state := fs.String("state", "", "queued, scheduled, in_flight, retrying, dead or done (required)")
	tenant := fs.String("tenant", "", "the tenant (required with an admin token)")
	limit := fs.Int("limit", 0, "jobs per page, 1 to 500 (default: the server's, 50)")
	cursor := fs.String("cursor", "", "start after this cursor (a next_cursor of an earlier page)")
	all := fs.Bool("all", false, "follow every page")
	asJSON := fs.Bool("json", false, "print the API's JSON answer (with --all: every job)")
	if _, err := c.parse(fs, args, 0, 0); err != nil {
		return err
	}
	switch {
	case *state == "":
		return usagef("--state is required: queued, scheduled, in_flight, retrying, dead or done")
	case *all && *cursor != "":
		return usagef("--all reads from the first page; give it or --cursor, not both")
	}
	cl, err := c.viewer()
	if err != nil {
		return err
	}
	q := client.JobsQuery{State: *state, Tenant: *tenant, Limit: *limit, Cursor: *cursor}
	page, err := cl.Jobs(ctx, q)
	if err != nil {
		return err
	}
	for *all && page.NextCursor != "" {
		q.Cursor = page.NextCursor
		next, err := cl.Jobs(ctx, q)
		if err != nil {
			return err
		}
		if next.NextCursor == q.Cursor {
			return fmt.Errorf("jobs list: the server answered the same cursor %q again", q.Cursor)
		}
		page.Jobs, page.NextCursor = append(page.Jobs, next.Jobs...), next.NextCursor
	}
	if *asJSON {
		out := map[string]any{"tenant": page.Tenant, "state": page.State, "jobs": page.Jobs}
		if !*all {
			out["next_cursor"] = nil
			if page.NextCursor != "" {
				out["next_cursor"] = page.NextCursor
			}
		}
		return c.printJSON(out)
	}
	return c.printJobs(page)
}

// printJobs prints a page as a table, and on stderr how to get the next.
func (c *cmd) printJobs(page client.JobPage) error {
	if len(page.Jobs) == 0 {
		fmt.Fprintf(c.env.Stdout, "no %s jobs of tenant %s\n", page.State, page.Tenant)
	} else {
		tw := tabwriter.NewWriter(c.env.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tTYPE\tSTATE\tPOSITION\tETA\tATTEMPT\tUPDATED\tLAST ERROR")
		for _, j := range page.Jobs {
			pos, updated := "-", "-"
			if j.Position != nil {
				pos = strconv.FormatInt(*j.Position, 10)
			}
			if !j.UpdatedAt.IsZero() {
				updated = j.UpdatedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", j.JobID, j.Type, j.State, pos, eta(j.ETASeconds),
				j.Attempt, updated, orDashS(j.LastError))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if page.NextCursor != "" {
		fmt.Fprintf(c.env.Stderr, "more: sluicectl jobs list --state %s --tenant %s --cursor %s (or --all)\n", page.State, page.Tenant, page.NextCursor)
	}
	return nil
}
