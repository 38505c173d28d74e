package sluicectl

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/limits"
)

// patchFlag is one flag of "tenants set" that sets one key of the tenant's
// spec in a JSON merge patch.
type patchFlag struct {
	name, path, usage string
	// kind is how the value is read: s string, i integer, f number,
	// b boolean, d duration, l comma-separated list.
	kind byte
}

// patchFlags are the keys "tenants set" can change one by one; anything
// else goes through --patch or --file.
var patchFlags = []patchFlag{
	{"algorithm", "admission.algorithm", "admission algorithm: " + limits.AlgorithmNames(), 's'},
	{"limit", "admission.limit", "admitted units per period", 'i'},
	{"period", "admission.period", "admission window, e.g. 1s or 1m", 'd'},
	{"burst", "admission.burst", "units admitted at once (gcra, token_bucket)", 'i'},
	{"rate", "outflow.rate", "outflow units per second across all drainers, > 0 (replaces --unlimited; 0 is refused: for no limit use --unlimited)", 'f'},
	{"unlimited", "outflow.unlimited", "no outflow rate limit (replaces the rate)", 'b'},
	{"capacity", "outflow.capacity", "outflow leaky-bucket size in units", 'f'},
	{"max-backlog", "outflow.max_backlog", "queued units at which ingest answers 429 (0: no cap)", 'i'},
	{"concurrency", "outflow.concurrency", "jobs in flight across all drainers (0: no cap)", 'i'},
	{"adaptive", "outflow.adaptive", "lower the outflow rate on downstream 429/503 (--adaptive=false: off)", 'b'},
	{"min-rate", "outflow.min_rate", "floor of the adaptive rate", 'f'},
	{"paused", "outflow.paused", "stop delivery (--paused=false: resume; also sluicectl pause/resume)", 'b'},
	{"target-url", "target.url", "URL the jobs are POSTed to", 's'},
	{"target-timeout", "target.timeout", "bound of one delivery, e.g. 10s", 'd'},
	{"on-limiter-error", "on_limiter_error", "allow (fail open) or deny (503) when Redis is down", 's'},
	{"api-keys", "api_keys", "comma-separated sha256:<hex> key hashes (sluicectl hash-key); replaces the list", 'l'},
}

// patch collects a JSON merge patch (RFC 7396) from --patch and the patch
// flags, in the order given; a flag's key wins over the same key in --patch.
type patch struct {
	raw    string         // --patch, as given
	values map[string]any // dotted path → value, from the flags
	order  []string       // paths in the order set
}

func newPatch(fs *flag.FlagSet) *patch {
	p := &patch{values: map[string]any{}}
	fs.Var(rawPatch{p}, "patch", "a JSON merge patch of the spec, or @file; null removes a key")
	for _, f := range patchFlags {
		fs.Var(&patchValue{p: p, f: f}, f.name, f.usage)
	}
	return p
}

func (p *patch) set() bool { return p.raw != "" || len(p.values) > 0 }

// body returns the merge patch: --patch's object with the flags' keys set
// in it.
func (p *patch) body(c *cmd) (map[string]any, error) {
	out := map[string]any{}
	if p.raw != "" {
		b, err := c.readArg(p.raw)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &out); err != nil || out == nil {
			return nil, usagef("--patch must be a JSON object (a merge patch of the spec)")
		}
	}
	for _, path := range p.order {
		obj := out
		parts := strings.Split(path, ".")
		for _, k := range parts[:len(parts)-1] {
			next, ok := obj[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				obj[k] = next
			}
			obj = next
		}
		obj[parts[len(parts)-1]] = p.values[path]
	}
	return out, nil
}

// summary lists what the patch sets: "outflow.rate=20, --patch".
func (p *patch) summary() string {
	var parts []string
	for _, path := range p.order {
		b, _ := json.Marshal(p.values[path])
		parts = append(parts, path+"="+strings.Trim(string(b), `"`))
	}
	sort.Strings(parts)
	if p.raw != "" {
		parts = append(parts, "--patch")
	}
	return strings.Join(parts, ", ")
}

// patchValue is the flag.Value of one patch flag: Set parses the value by
// the flag's kind and records it under the flag's path.
type patchValue struct {
	p *patch
	f patchFlag
}

func (v *patchValue) String() string { return "" }

// IsBoolFlag lets --adaptive stand alone for --adaptive=true.
func (v *patchValue) IsBoolFlag() bool { return v.f.kind == 'b' }

func (v *patchValue) Set(s string) error {
	var val any
	var err error
	switch v.f.kind {
	case 's':
		val = s
	case 'i':
		val, err = strconv.ParseInt(s, 10, 64)
	case 'f':
		f, perr := strconv.ParseFloat(s, 64)
		if (perr == nil || errors.Is(perr, strconv.ErrRange)) && (math.IsNaN(f) || math.IsInf(f, 0)) {
			// JSON has no NaN or Inf; refuse it here, as the server
			// refuses a rate of 0, rather than fail to encode the patch.
			return fmt.Errorf("--%s must be a finite number (got %s); %s", v.f.name, s, config.StopHint)
		}
		val, err = f, perr
	case 'b':
		val, err = strconv.ParseBool(s)
	case 'd':
		var d time.Duration
		if d, err = time.ParseDuration(s); err == nil {
			val = d.String()
		}
	case 'l':
		list := []string{}
		for _, item := range strings.Split(s, ",") {
			if item = strings.TrimSpace(item); item != "" {
				list = append(list, item)
			}
		}
		val = list
	}
	if err != nil {
		return fmt.Errorf("%s: %w", v.f.path, err)
	}
	if _, seen := v.p.values[v.f.path]; !seen {
		v.p.order = append(v.p.order, v.f.path)
	}
	v.p.values[v.f.path] = val
	return nil
}

// rawPatch is the flag.Value of --patch.
type rawPatch struct{ p *patch }

func (r rawPatch) String() string { return "" }

func (r rawPatch) Set(s string) error {
	r.p.raw = s
	return nil
}
