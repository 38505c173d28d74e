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
// and the keys it changed ("outflow.rate: 5 → 20").
func (c *cmd) tenantsAudit(ctx context.Context, args []string) error {
	fs := c.flags("audit", "ID [--json]")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	a, pos, err := c.adminArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	entries, err := a.Audit(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(map[string]any{"entries": entries})
	}
	if len(entries) == 0 {
		fmt.Fprintf(c.env.Stdout, "no changes of tenant %s\n", pos[0])
		return nil
	}
	for _, e := range entries {
		changes := strings.Join(specDiff(e.Old, e.New), ", ")
		if changes == "" {
			changes = "no change"
		}
		fmt.Fprintf(c.env.Stdout, "%s  %s  %s  %s\n", e.At.UTC().Format(time.RFC3339), e.Who, e.Action, changes)
	}
	return nil
}

// specDiff lists the keys that differ between two specs, by path, sorted:
// "outflow.rate: 5 → 20", "+target.url=http://…", "-outflow.concurrency".
func specDiff(old, new *client.TenantSpec) []string {
	a, b := flatten(old), flatten(new)
	paths := map[string]bool{}
	for p := range a {
		paths[p] = true
	}
	for p := range b {
		paths[p] = true
	}
	var out []string
	for p := range paths {
		va, ina := a[p]
		vb, inb := b[p]
		switch {
		case ina && inb && va != vb:
			out = append(out, fmt.Sprintf("%s: %s → %s", p, va, vb))
		case !ina && inb:
			out = append(out, fmt.Sprintf("+%s=%s", p, vb))
		case ina && !inb:
			out = append(out, "-"+p)
		}
	}
	sort.Strings(out)
	return out
}

// flatten maps every leaf of spec's JSON to its dotted path; arrays are
// leaves, written as JSON.
func flatten(spec *client.TenantSpec) map[string]string {
	out := map[string]string{}
	if spec == nil {
		return out
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return out
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return out
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if obj, ok := v.(map[string]any); ok {
			for k, child := range obj {
				walk(joinPath(prefix, k), child)
			}
			return
		}
		if s, ok := v.(string); ok {
			out[prefix] = s
			return
		}
		j, _ := json.Marshal(v)
		out[prefix] = string(j)
	}
	walk("", m)
	return out
}

func joinPath(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
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
