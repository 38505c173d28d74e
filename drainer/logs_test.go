package drainer_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// oneFailLine checks that logs have one delivery-failed line for tenant
// (its failures all fell within one 10-s window) and that it names the
// first failure: attempt 1, its error, nothing left out before it.
func oneFailLine(t *testing.T, logs *testenv.LogBuffer, tenant string) {
	t.Helper()
	log := logs.String()
	if n := strings.Count(log, `msg="drainer: delivery failed" tenant=`+tenant+" "); n != 1 {
		t.Errorf("%d delivery-failed lines for the tenant, want 1; log:\n%s", n, log)
	} else if !strings.Contains(log, " attempt=1 ") || !strings.Contains(log, " err=") || !strings.Contains(log, " suppressed=0 ") {
		t.Errorf("the delivery-failed line lacks attempt=1, err= or suppressed=0 (the first failure):\n%s", log)
	}
}
