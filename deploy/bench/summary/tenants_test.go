package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// TestSummaryTenants: testdata/run's tenants scenarios give requirement
// 3's rows: A against its goals, B's figures against A's with the missed
// ones named, the stated figures.
func TestSummaryTenants(t *testing.T) {
	in, err := load("testdata/run")
	if err != nil {
		t.Fatal(err)
	}
	want := []row{
		{"2,000 tenants × 1 job/s: aggregate jobs/s", "1998.0", "—", "0.999×", "2000 (within 1 %)", "yes"},
		{"2,000 tenants × 1 job/s: worst tenant's rate error", "0.12 % (0 of 2000 over, 0 without a rate)", "—", "—", "≤ 1 %, every tenant", "yes"},
		{"10,000 configured / 2,000 active vs 2,000: each figure within 10 %",
			"aggregate jobs/s 0.95×, worst tenant error % 5.00×, drainer RSS max 2.50×, goroutines 4.90×, drainer CPU s 1.50×", "—", "—",
			"each B ÷ A within 10 % (worst error: B ≤ max(1.1 × A, 1 %))", "**no** (drainer RSS max, goroutines, drainer CPU s)"},
		{"tenants: drainer RSS max, MB, 2,000 active / 10,000 configured", "80.0 / 200.0", "—", "—", "stated", "—"},
		{"tenants: drainer goroutines, 2,000 active / 10,000 configured", "4100 / 20100", "—", "—", "stated", "—"},
		{"tenants: Redis memory per idle tenant, bytes", "1000", "—", "—", "stated", "—"},
		{"tenants: Redis commands/s per idle tenant", "12.500", "—", "—", "stated", "—"},
	}
	if diff := cmp.Diff(want, in.tenantsRows(), cmp.AllowUnexported(row{})); diff != "" {
		t.Errorf("tenants rows (-want +got):\n%s", diff)
	}
	rows := map[string]bool{}
	for _, r := range in.rows() {
		rows[r.what] = true
	}
	for _, w := range want {
		if !rows[w.what] {
			t.Errorf("the table lacks %q", w.what)
		}
	}
}

// TestSampleTenantsCompare: the sample's stored comparison is
// drainresult.CompareTenants of its scenarios, as drainbench writes it.
func TestSampleTenantsCompare(t *testing.T) {
	d, err := drainresult.Read("testdata/run/drain.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Tenants) != 2 || d.TenantsCompare == nil {
		t.Fatalf("sample: %d tenants scenarios, compare %v; want 2 and one", len(d.Tenants), d.TenantsCompare)
	}
	c, ok := drainresult.CompareTenants(d.Tenants[0], d.Tenants[1])
	if diff := cmp.Diff(c, *d.TenantsCompare, cmpopts.EquateApprox(0, 1e-12)); !ok || diff != "" {
		t.Errorf("tenants_compare ok %v (-CompareTenants +stored):\n%s", ok, diff)
	}
}

// TestSummaryTenantsFailed: a failed scenario A reads "failed" and its
// goals not met; without B the comparison and the per-idle rows read "not
// run", named with the run's counts.
func TestSummaryTenantsFailed(t *testing.T) {
	in := inputs{drain: &drainresult.Report{Tenants: []drainresult.Tenants{
		{Scenario: "active", Configured: 500, Active: 500, Rate: 1, Err: "drainer not ready"},
	}}}
	got := in.tenantsRows()
	want := []row{
		{"500 tenants × 1 job/s: aggregate jobs/s", "failed", "—", "—", "500 (within 1 %)", "**no**"},
		{"500 tenants × 1 job/s: worst tenant's rate error", "failed", "—", "—", "≤ 1 %, every tenant", "**no**"},
		{"10,000 configured / 500 active vs 500: each figure within 10 %", notRun, "—", "—", "each B ÷ A within 10 % (worst error: B ≤ max(1.1 × A, 1 %))", notRun},
		{"tenants: drainer RSS max, MB, 500 active / 10,000 configured", notRun, "—", "—", "stated", notRun},
		{"tenants: drainer goroutines, 500 active / 10,000 configured", notRun, "—", "—", "stated", notRun},
		{"tenants: Redis memory per idle tenant, bytes", notRun, "—", "—", "stated", notRun},
		{"tenants: Redis commands/s per idle tenant", notRun, "—", "—", "stated", notRun},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(row{})); diff != "" {
		t.Errorf("tenants rows (-want +got):\n%s", diff)
	}
	for n, w := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != w {
			t.Errorf("thousands(%d) = %q, want %q", n, got, w)
		}
	}
}
