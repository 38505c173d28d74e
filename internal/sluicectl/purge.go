package sluicectl

import (
	"context"
	"fmt"
)

// purge cancels every waiting job of a tenant (POST
// /admin/v1/tenants/{id}/queue:purge; admin token).
func (c *cmd) purge(ctx context.Context, args []string) error {
	fs := c.flags("", "TENANT [--json]")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	a, pos, err := c.adminArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	n, err := a.Purge(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return c.printJSON(map[string]int64{"purged": n})
	}
	fmt.Fprintf(c.env.Stdout, "purged %d jobs of tenant %s (cancelled; jobs in flight finish)\n", n, pos[0])
	return nil
}
