package sluicectl

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/client"
)

// tenants runs "tenants list|get|set|delete|audit" against the admin API.
func (c *cmd) tenants(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("missing sub-command: list, get, set, delete or audit")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "list", "ls":
		return c.tenantsList(ctx, args)
	case "get":
		return c.tenantsGet(ctx, args)
	case "set":
		return c.tenantsSet(ctx, args)
	case "delete", "rm":
		return c.tenantsDelete(ctx, args)
	case "audit":
		return c.tenantsAudit(ctx, args)
	}
	return usagef("unknown sub-command %q: want list, get, set, delete or audit", sub)
}

func (c *cmd) tenantsList(ctx context.Context, args []string) error {
	fs := c.flags("list", "[--json]")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	a, _, err := c.adminArgs(fs, args, 0, 0)
	if err != nil {
		return err
	}
	ts, err := a.Tenants(ctx)
	if err != nil {
		return err
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	if *asJSON {
		return c.printJSON(map[string]any{"tenants": ts})
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tSOURCE\tADMISSION\tOUTFLOW\tMAX BACKLOG\tTARGET")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Source, admissionText(t.Spec.Admission),
			outflowText(t.Spec.Outflow), orDash(t.Spec.Outflow.MaxBacklog), orDashS(t.Spec.Target.URL))
	}
	return tw.Flush()
}

func (c *cmd) tenantsGet(ctx context.Context, args []string) error {
	fs := c.flags("get", "ID")
	a, pos, err := c.adminArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	t, err := a.Tenant(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.printJSON(t)
}

// tenantsSet replaces the tenant's spec with --file (PUT), or changes the
// keys given by flags (a JSON merge patch, PATCH).
func (c *cmd) tenantsSet(ctx context.Context, args []string) error {
	fs := c.flags("set", "ID (--file spec.json|- | --patch JSON|@file | --rate R --capacity C --limit L ...)")
	file := fs.String("file", "", "the tenant's whole spec as JSON (PUT: creates or replaces); - for stdin")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	patch := newPatch(fs)
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	id := pos[0]
	switch {
	case *file != "" && patch.set():
		return usagef("--file replaces the whole spec; give it alone, or change keys with flags")
	case *file == "" && !patch.set():
		return usagef("nothing to set: give --file, --patch, or flags such as --rate")
	}
	a, err := c.admin()
	if err != nil {
		return err
	}
	if *file != "" {
		spec, err := c.readSpec(*file)
		if err != nil {
			return err
		}
		t, created, err := a.PutTenant(ctx, id, spec)
		if err != nil {
			return err
		}
		if *asJSON {
			return c.printJSON(t)
		}
		verb := "replaced"
		if created {
			verb = "created"
		}
		fmt.Fprintf(c.env.Stdout, "%s tenant %s (version %d)\n", verb, t.ID, t.Version)
		return nil
	}
	body, err := patch.body(c)
	if err != nil {
		return err
	}
	t, err := a.PatchTenant(ctx, id, body)
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(t)
	}
	fmt.Fprintf(c.env.Stdout, "updated tenant %s (version %d): %s\n", t.ID, t.Version, patch.summary())
	return nil
}

// readSpec reads a tenant spec file strictly: an unknown key is an error
// naming it, before anything is sent.
func (c *cmd) readSpec(name string) (client.TenantSpec, error) {
	b, err := c.readFile(name)
	if err != nil {
		return client.TenantSpec{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var spec client.TenantSpec
	if err := dec.Decode(&spec); err != nil {
		return client.TenantSpec{}, fmt.Errorf("spec %s: %w", name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return client.TenantSpec{}, fmt.Errorf("spec %s: data after the JSON object", name)
	}
	return spec, nil
}

func (c *cmd) tenantsDelete(ctx context.Context, args []string) error {
	fs := c.flags("delete", "ID")
	a, pos, err := c.adminArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if err := a.DeleteTenant(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(c.env.Stdout, "deleted tenant %s\n", pos[0])
	return nil
}

// tenantsAudit prints one line per change, newest first: when, who, what,
// and the fields it changed ("outflow.rate: 5 → 20"). It prints one page
// (--limit entries, older than --cursor) and says on stderr how to get the
// next; --all follows every page.
func (c *cmd) tenantsAudit(ctx context.Context, args []string) error {
	fs := c.flags("audit", "ID [--limit N] [--cursor C | --all] [--json]")
	asJSON := fs.Bool("json", false, "print the API's JSON answer (with --all: every entry)")
	limit := fs.Int("limit", 0, "entries per page, 1 to 100 (default: the server's, 100)")
	cursor := fs.String("cursor", "", "start below this cursor (a next_cursor of an earlier page)")
	all := fs.Bool("all", false, "follow every page: the whole audit the server keeps")
	a, pos, err := c.adminArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *all && *cursor != "" {
		return usagef("--all reads from the newest entry; give it or --cursor, not both")
	}
	page, err := a.AuditPage(ctx, pos[0], *limit, *cursor)
	if err != nil {
		return err
	}
	for *all && page.NextCursor != "" {
		next, err := a.AuditPage(ctx, pos[0], *limit, page.NextCursor)
		if err != nil {
			return err
		}
		if next.NextCursor == page.NextCursor {
			return fmt.Errorf("audit of %s: the server answered the same cursor %q again", pos[0], next.NextCursor)
		}
		page = client.AuditPage{Entries: append(page.Entries, next.Entries...), NextCursor: next.NextCursor}
	}
	if *asJSON {
		out := map[string]any{"entries": page.Entries}
		if !*all {
			out["next_cursor"] = nil
			if page.NextCursor != "" {
				out["next_cursor"] = page.NextCursor
			}
		}
		return c.printJSON(out)
	}
	if len(page.Entries) == 0 {
		fmt.Fprintf(c.env.Stdout, "no changes of tenant %s\n", pos[0])
	}
	for _, e := range page.Entries {
		fmt.Fprintf(c.env.Stdout, "%s  %s  %s  %s\n", e.At.UTC().Format(time.RFC3339), e.Who, e.Action, changesText(e))
	}
	if page.NextCursor != "" {
		fmt.Fprintf(c.env.Stderr, "older changes: sluicectl tenants audit %s --cursor %s (or --all)\n", pos[0], page.NextCursor)
	}
	return nil
}

// changesText is an entry's changes in a line, by path: "outflow.rate: 5 →
// 20", "+target.url=http://…" (set), "-outflow.concurrency" (removed), a
// cut value ending in "…", and "… N more" when the entry lists only some.
func changesText(e client.AuditEntry) string {
	parts := make([]string, 0, len(e.Changes)+1)
	for _, ch := range e.Changes {
		parts = append(parts, changeText(ch))
	}
	if more := e.ChangesTotal - len(e.Changes); e.Truncated && more > 0 {
		parts = append(parts, fmt.Sprintf("… %d more", more))
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

// changeText is one change as changesText writes it.
func changeText(ch client.AuditChange) string {
	cut := ""
	if ch.Truncated {
		cut = "…"
	}
	value := func(v *string) string {
		var s string
		if json.Unmarshal([]byte(*v), &s) == nil {
			return s // a JSON string, shown without its quotes
		}
		if ch.Truncated && strings.HasPrefix(*v, `"`) {
			return strings.TrimPrefix(*v, `"`) // a cut string: no closing quote
		}
		return *v
	}
	switch {
	case ch.Old != nil && ch.New != nil:
		return fmt.Sprintf("%s: %s → %s%s", ch.Path, value(ch.Old), value(ch.New), cut)
	case ch.New != nil:
		return fmt.Sprintf("+%s=%s%s", ch.Path, value(ch.New), cut)
	default:
		return "-" + ch.Path + cut
	}
}

// admissionText is a policy in a few words: "gcra 20/1s burst 10".
func admissionText(a client.Admission) string {
	if a.Algorithm == "" {
		return "-"
	}
	s := fmt.Sprintf("%s %d/%s", a.Algorithm, a.Limit, shortDuration(time.Duration(a.Period)))
	if a.Burst != 0 && a.Burst != a.Limit {
		s += fmt.Sprintf(" burst %d", a.Burst)
	}
	return s
}

// outflowText is an outflow in a few words: "5/s cap 5", "unlimited".
func outflowText(o client.Outflow) string {
	s := "unlimited"
	if !o.Unlimited {
		s = num(o.Rate) + "/s"
		if o.Capacity != 0 {
			s += " cap " + num(o.Capacity)
		}
	}
	if o.Concurrency > 0 {
		s += fmt.Sprintf(" conc %d", o.Concurrency)
	}
	return s
}

// shortDuration drops the zero units of d: "1s", "1m", "1h30m"; 0 is "1s"
// (the default period).
func shortDuration(d time.Duration) string {
	if d == 0 {
		return "1s"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func orDash(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func orDashS(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printJSON writes v as indented JSON.
func (c *cmd) printJSON(v any) error {
	enc := json.NewEncoder(c.env.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// adminArgs parses args with fs (between min and max positional arguments)
// and returns the admin client and the positional arguments.
func (c *cmd) adminArgs(fs *flag.FlagSet, args []string, min, max int) (*client.Admin, []string, error) {
	pos, err := c.parse(fs, args, min, max)
	if err != nil {
		return nil, nil, err
	}
	a, err := c.admin()
	return a, pos, err
}
