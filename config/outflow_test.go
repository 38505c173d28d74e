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

// TestOutflowBounds walks each outflow bound from both sides in a config
// file: rate in [MinOutflowRate, MaxOutflowRate], capacity in [1,
// MaxOutflowCapacity], min_rate in [0, rate], every number finite. A
// refusal names the field and the bound.
func TestOutflowBounds(t *testing.T) {
	for _, tc := range []struct{ name, outflow, want string }{
		{"rate at the minimum", "{rate: 0.001}", ""},
		{"rate below the minimum", "{rate: 0.000999}", "tenants.a.outflow.rate: must be >= 0.001 units per second, one unit every 1000 s (got 0.000999); " + config.StopHint},
		{"rate far below the minimum", "{rate: 1e-320}", "tenants.a.outflow.rate: must be >= 0.001 units per second"},
		{"rate at the maximum", "{rate: 1000000}", ""},
		{"rate above the maximum", "{rate: 1000000.001}", "tenants.a.outflow.rate: must be <= 1000000 units per second"},
		{"capacity at the minimum", "{rate: 2, capacity: 1}", ""},
		{"capacity below the minimum", "{rate: 2, capacity: 0.999}", "tenants.a.outflow.capacity: must be >= 1 so a job of cost 1 can ever go (got 0.999)"},
		{"capacity negative", "{rate: 2, capacity: -1}", "tenants.a.outflow.capacity: must be >= 0 (got -1)"},
		{"capacity at the maximum", "{rate: 2, capacity: 1000000000}", ""},
		{"capacity above the maximum", "{rate: 2, capacity: 1000000000.5}", "tenants.a.outflow.capacity: must be <= 1000000000 units, the most the outflow bucket holds exactly (got 1.0000000005e+09)"},
		{"capacity the script refuses", "{rate: 2, capacity: 9007199255}", "tenants.a.outflow.capacity: must be <= 1000000000 units"},
		{"capacity 1e300", "{rate: 2, capacity: 1e300}", "tenants.a.outflow.capacity: must be <= 1000000000 units"},
		{"capacity Inf", "{rate: 2, capacity: .inf}", "tenants.a.outflow.capacity: must be a finite number of units (got +Inf)"},
		{"capacity NaN", "{rate: 2, capacity: .nan}", "tenants.a.outflow.capacity: must be a finite number of units (got NaN)"},
		{"min_rate 0", "{rate: 2, min_rate: 0}", ""}, // 0 is the default: rate ÷ 10
		{"min_rate at rate", "{rate: 2, min_rate: 2}", ""},
		{"min_rate above rate", "{rate: 2, min_rate: 2.001}", "tenants.a.outflow.min_rate: must be between 0 and rate 2 units per second (got 2.001)"},
		{"min_rate negative", "{rate: 2, min_rate: -0.001}", "tenants.a.outflow.min_rate: must be between 0 and rate 2 units per second (got -0.001)"},
		{"min_rate NaN", "{rate: 2, min_rate: .nan}", "tenants.a.outflow.min_rate: must be between 0 and rate 2 units per second (got NaN)"},
		{"min_rate Inf", "{rate: 2, min_rate: .inf}", "tenants.a.outflow.min_rate: must be between 0 and rate 2 units per second (got +Inf)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := "tenants: {a: {outflow: " + tc.outflow + "}}\n"
			_, err := config.Parse([]byte(y))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Parse(%q) = %v, want no error", y, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Parse(%q) = %v, want an error containing %q", y, err, tc.want)
			}
		})
	}
	// The default min_rate of the smallest rate is a tenth of it, inside [0, rate].
	cfg, err := config.Parse([]byte("tenants: {a: {outflow: {rate: 0.001}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.Tenants["a"].Outflow; o.MinRate != 0.0001 || o.Capacity != 1 {
		t.Errorf("defaults of rate 0.001: %+v, want min_rate 0.0001 and capacity 1", o)
	}
}

// TestUnlimitedOutflowHasNoBucket: the defaults drop the capacity and
// min_rate of an unlimited outflow, which nothing would read (ADR 0011).
func TestUnlimitedOutflowHasNoBucket(t *testing.T) {
	for _, y := range []string{
		"tenants: {a: {outflow: {unlimited: true, capacity: 5, min_rate: 0.5, max_backlog: 3}}}\n",
		"tenants: {a: {outflow: {capacity: 5, min_rate: 0.5, max_backlog: 3}}}\n",
	} {
		cfg, err := config.Parse([]byte(y))
		if err != nil {
			t.Fatalf("Parse(%q): %v", y, err)
		}
		if o := cfg.Tenants["a"].Outflow; !o.Unlimited || o.Capacity != 0 || o.MinRate != 0 || o.MaxBacklog != 3 {
			t.Errorf("Parse(%q) outflow = %+v, want unlimited, capacity 0, min_rate 0, max_backlog 3", y, o)
		}
	}
}

// TestOutflowPaused: outflow.paused is false unless given, is read from the
// file and from a SLUICE_* override, keeps the rate (pausing is not a rate),
// and is not a boolean only as a boolean.
func TestOutflowPaused(t *testing.T) {
	for _, tc := range []struct {
		name, outflow, env string
		paused, shaped     bool
	}{
		{"not given", "{rate: 5}", "", false, true},
		{"paused, shaped", "{rate: 5, paused: true}", "", true, true},
		{"paused, unlimited", "{paused: true}", "", true, false},
		{"resumed", "{rate: 5, paused: false}", "", false, true},
		{"paused by an override", "{rate: 5, paused: false}", "true", true, true}, // viper overrides keys the file has
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("SLUICE_TENANTS_A_OUTFLOW_PAUSED", tc.env)
			}
			y := "tenants: {a: {outflow: " + tc.outflow + "}}\n"
			cfg, err := config.Parse([]byte(y))
			if err != nil {
				t.Fatalf("Parse(%q): %v", y, err)
			}
			o := cfg.Tenants["a"].Outflow
			if o.Paused != tc.paused || o.Shaped() != tc.shaped {
				t.Errorf("outflow %+v, want paused %v, shaped %v", o, tc.paused, tc.shaped)
			}
		})
	}
	if _, err := config.Parse([]byte("tenants: {a: {outflow: {rate: 5, paused: [1]}}}\n")); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Errorf("paused [1]: %v, want an error naming paused", err)
	}
	if !strings.Contains(config.StopHint, `{"outflow":{"paused":true}}`) || !strings.Contains(config.StopHint, "sluicectl pause") {
		t.Errorf("StopHint %q, want it to say how to pause", config.StopHint)
	}
}
