package config_test

import (
	"math"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// TestOutflowRateRefused: a rate of 0, below it, not finite or above
// MaxOutflowRate stops the load naming outflow.rate and saying how to stop
// delivery instead; unlimited is spelled out and excludes a rate.
func TestOutflowRateRefused(t *testing.T) {
	for _, tc := range []struct{ name, outflow, want string }{
		{"rate 0", "{rate: 0}", "config: tenants.a.outflow.rate: must be > 0 units per second (got 0); " + config.StopHint},
		{"rate 0.0", "{rate: 0.0, capacity: 5}", "tenants.a.outflow.rate: must be > 0 units per second (got 0)"},
		{"negative", "{rate: -2}", "tenants.a.outflow.rate: must be > 0 units per second (got -2); " + config.StopHint},
		{"NaN", "{rate: .nan}", "tenants.a.outflow.rate: must be a finite number of units per second (got NaN); " + config.StopHint},
		{"Inf", "{rate: .inf}", "tenants.a.outflow.rate: must be a finite number of units per second (got +Inf)"},
		{"above the maximum", "{rate: 1000000.5}", "tenants.a.outflow.rate: must be <= 1000000 units per second (got 1.0000005e+06); for no limit set outflow.unlimited: true"},
		{"unlimited with a rate", "{rate: 5, unlimited: true}", "tenants.a.outflow.unlimited: true excludes a rate (got rate 5); leave out one of them"},
		{"unlimited false without a rate", "{unlimited: false}", "tenants.a.outflow.unlimited: false needs a rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := "tenants: {a: {outflow: " + tc.outflow + "}}\n"
			_, err := config.Parse([]byte(y))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%q) = %v, want an error containing %q", y, err, tc.want)
			}
		})
	}
}

func TestOutflowRateAccepted(t *testing.T) {
	for _, tc := range []struct {
		name, outflow string
		unlimited     bool
		rate          float64
	}{
		{"no outflow", "", true, 0},
		{"outflow without a rate", "outflow: {max_backlog: 3, concurrency: 2}", true, 0},
		{"unlimited", "outflow: {unlimited: true, max_backlog: 3}", true, 0},
		{"smallest", "outflow: {rate: 0.001}", false, 0.001},
		{"maximum", "outflow: {rate: 1000000}", false, config.MaxOutflowRate},
		{"unlimited false with a rate", "outflow: {rate: 4, unlimited: false}", false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := "tenants: {a: {" + tc.outflow + "}}\n"
			cfg, err := config.Parse([]byte(y))
			if err != nil {
				t.Fatalf("Parse(%q): %v", y, err)
			}
			o := cfg.Tenants["a"].Outflow
			if o.Unlimited != tc.unlimited || o.Rate != tc.rate || o.Shaped() == tc.unlimited {
				t.Errorf("outflow %+v (shaped %v), want unlimited %v, rate %v", o, o.Shaped(), tc.unlimited, tc.rate)
			}
		})
	}
}

// TestOutflowRateEnvOverride: SLUICE_TENANTS_A_OUTFLOW_RATE=0 is a rate of
// 0 spelled out, refused as in the file.
func TestOutflowRateEnvOverride(t *testing.T) {
	t.Setenv("SLUICE_TENANTS_A_OUTFLOW_RATE", "0")
	_, err := config.Parse([]byte("tenants: {a: {outflow: {rate: 5}}}\n"))
	if want := "tenants.a.outflow.rate: must be > 0 units per second (got 0)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Parse = %v, want an error containing %q", err, want)
	}
	t.Setenv("SLUICE_TENANTS_A_OUTFLOW_RATE", "7")
	cfg, err := config.Parse([]byte("tenants: {a: {outflow: {rate: 5}}}\n"))
	if err != nil || cfg.Tenants["a"].Outflow.Rate != 7 {
		t.Errorf("Parse with rate 7 from the environment = %v, %v", cfg, err)
	}
}

// TestOutflowValidateStruct: Validate refuses the same on a config built by
// hand (no presence to see): a rate of 0 without Unlimited, a rate with it,
// a rate out of bounds.
func TestOutflowValidateStruct(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    config.Outflow
		want string
	}{
		{"rate 0, not unlimited", config.Outflow{}, "tenants.a.outflow.rate: must be set, in units per second > 0, or outflow.unlimited true"},
		{"unlimited with a rate", config.Outflow{Rate: 5, Capacity: 5, Unlimited: true}, "tenants.a.outflow.unlimited: true excludes a rate"},
		{"NaN", config.Outflow{Rate: math.NaN(), Capacity: 1}, "tenants.a.outflow.rate: must be a finite number"},
		{"too high", config.Outflow{Rate: 2e6, Capacity: 1}, "tenants.a.outflow.rate: must be <= 1000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte("tenants: {a: {}}\n"))
			if err != nil {
				t.Fatal(err)
			}
			a := cfg.Tenants["a"]
			a.Outflow = tc.o
			cfg.Tenants["a"] = a
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// The defaults step makes a hand-built outflow without a rate unlimited.
	if o := (config.Outflow{MaxBacklog: 5}).WithDefaults(); !o.Unlimited || o.Shaped() || o.Capacity != 0 || o.MinRate != 0 {
		t.Errorf("WithDefaults of an outflow without a rate = %+v, want unlimited without capacity or min_rate", o)
	}
}
