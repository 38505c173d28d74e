package sluicectl

import (
	"context"
	"fmt"
)

// pause stops delivery of a tenant's jobs: PATCH /admin/v1/tenants/{id}
// {"outflow":{"paused":true}}. Within 1 s no drainer starts a delivery of
// its jobs (those in flight finish); ingest keeps admitting them into the
// backlog up to max_backlog.
func (c *cmd) pause(ctx context.Context, args []string) error { return c.setPaused(ctx, args, true) }

// resume lifts a pause: {"outflow":{"paused":false}}. Delivery goes on at
// the tenant's shaped rate, at most the bucket's capacity at once.
func (c *cmd) resume(ctx context.Context, args []string) error {
	return c.setPaused(ctx, args, false)
}

// setPaused sends the patch of pause or resume and says what it did.
func (c *cmd) setPaused(ctx context.Context, args []string, paused bool) error {
	fs := c.flags("", "TENANT [--json]")
	asJSON := fs.Bool("json", false, "print the API's JSON answer (the tenant)")
	a, pos, err := c.adminArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	t, err := a.PatchTenant(ctx, pos[0], map[string]any{"outflow": map[string]any{"paused": paused}})
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(t)
	}
	if paused {
		fmt.Fprintf(c.env.Stdout, "paused tenant %s (version %d): no delivery starts within 1 s, jobs in flight finish, ingest still admits up to max_backlog; sluicectl resume %s to go on\n", t.ID, t.Version, t.ID)
		return nil
	}
	fmt.Fprintf(c.env.Stdout, "resumed tenant %s (version %d): delivery goes on at its outflow rate\n", t.ID, t.Version)
	return nil
}
