package sluicectl

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/client"
)

// dlq runs "dlq list|show|redrive|delete" against the dead-letter API.
func (c *cmd) dlq(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("missing sub-command: list, show, redrive or delete")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "list", "ls":
		return c.dlqList(ctx, args)
	case "show":
		return c.dlqShow(ctx, args)
	case "redrive":
		return c.dlqRedrive(ctx, args)
	case "delete", "rm":
		return c.dlqDelete(ctx, args)
	}
	return usagef("unknown sub-command %q: want list, show, redrive or delete", sub)
}

// dlqList prints one page of the tenant's dead letters, newest first, and
// says on stderr how to get the next.
func (c *cmd) dlqList(ctx context.Context, args []string) error {
	fs := c.flags("list", "TENANT [--limit N] [--cursor C] [--json]")
	limit := fs.Int("limit", 0, "dead letters per page, 1 to 100 (default: the server's, 50)")
	cursor := fs.String("cursor", "", "continue after this cursor (a next_cursor of an earlier page)")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	a, pos, err := c.adminArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	p, err := a.DeadLetters(ctx, pos[0], *limit, *cursor)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(p)
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tTYPE\tREASON\tSTATUS\tATTEMPTS\tFAILED AT\tLAST ERROR\tEXCERPT")
	for _, d := range p.Jobs {
		ex := d.Excerpt
		if d.ExcerptTruncated {
			ex += "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.JobID, orDashS(d.Type), d.Reason, orDash(int64(d.Status)),
			d.Attempts, d.FailedAt.Format(time.RFC3339), orDashS(oneLine(d.LastError, 40)), oneLine(ex, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.NextCursor != "" {
		fmt.Fprintf(c.env.Stderr, "more: sluicectl dlq list %s --cursor %s\n", pos[0], p.NextCursor)
	}
	return nil
}

func (c *cmd) dlqShow(ctx context.Context, args []string) error {
	fs := c.flags("show", "TENANT JOB_ID")
	a, pos, err := c.adminArgs(fs, args, 2, 2)
	if err != nil {
		return err
	}
	d, err := a.DeadLetter(ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	return c.printJSON(d)
}

// dlqTargets parses "TENANT ID… | TENANT --all".
func (c *cmd) dlqTargets(sub string, args []string) (*client.Admin, string, []string, bool, error) {
	fs := c.flags(sub, "TENANT (JOB_ID... | --all)")
	all := fs.Bool("all", false, "every dead letter of the tenant")
	a, pos, err := c.adminArgs(fs, args, 1, -1)
	if err != nil {
		return nil, "", nil, false, err
	}
	switch ids := pos[1:]; {
	case *all && len(ids) > 0:
		return nil, "", nil, false, usagef("give job ids or --all, not both")
	case !*all && len(ids) == 0:
		return nil, "", nil, false, usagef("give job ids, or --all")
	}
	return a, pos[0], pos[1:], *all, nil
}

func (c *cmd) dlqRedrive(ctx context.Context, args []string) error {
	a, tenant, ids, all, err := c.dlqTargets("redrive", args)
	if err != nil {
		return err
	}
	var r client.Redriven
	if all {
		r, err = a.RedriveAll(ctx, tenant)
	} else {
		r, err = a.Redrive(ctx, tenant, ids)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.env.Stdout, "redriven %d\n", r.Redriven)
	for _, s := range r.Skipped {
		fmt.Fprintf(c.env.Stdout, "skipped %s (%s)\n", s.JobID, s.Reason)
	}
	return nil
}

func (c *cmd) dlqDelete(ctx context.Context, args []string) error {
	a, tenant, ids, all, err := c.dlqTargets("delete", args)
	if err != nil {
		return err
	}
	if all {
		n, err := a.DeleteDeadLetters(ctx, tenant)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.env.Stdout, "deleted %d\n", n)
		return nil
	}
	for _, id := range ids {
		if err := a.DeleteDeadLetter(ctx, tenant, id); err != nil {
			return fmt.Errorf("delete %s: %w", id, err)
		}
	}
	fmt.Fprintf(c.env.Stdout, "deleted %d\n", len(ids))
	return nil
}

// oneLine returns s on one line, cut to n runes ("…" when cut).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
