package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/keys"
)

// EnvPrefix starts every environment override: SLUICE_REDIS_ADDR overrides
// redis.addr, SLUICE_KAFKA_BROKERS (comma-separated) overrides kafka.brokers.
const EnvPrefix = "SLUICE"

// Load reads the YAML file at path (when path is empty, the file named by
// SLUICE_CONFIG; when both are empty, defaults only), applies SLUICE_*
// environment overrides and defaults, and validates the result. Unknown keys
// and invalid values are reported together, each naming its key.
func Load(path string) (*Config, error) {
	if path == "" {
		path = os.Getenv(EnvPrefix + "_CONFIG")
	}
	var raw []byte
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: read %s: %w", path, err)
		}
		raw = b
	}
	cfg, err := Parse(raw)
	if err != nil && path != "" {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, err
}

// Parse is Load for YAML bytes already in hand (environment overrides still
// apply).
func Parse(raw []byte) (*Config, error) {
	v := viper.New()
	v.SetConfigType("yaml")
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	setDefaults(v)
	if len(raw) > 0 {
		if err := checkNames(raw); err != nil {
			return nil, err
		}
		if err := v.ReadConfig(bytes.NewReader(raw)); err != nil {
			return nil, fmt.Errorf("config: parse yaml: %w", err)
		}
	}
	var cfg Config
	hook := viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		durationFromNumber,
		OutflowHook,
		AdmissionHook,
		TargetHook,
		mapstructure.StringToTimeDurationHookFunc(),
		mapstructure.StringToSliceHookFunc(","),
	))
	if err := v.UnmarshalExact(&cfg, hook); err != nil {
		return nil, decodeError(err)
	}
	// viper folds every key to lower case; tenant and job type names are
	// case-sensitive ids, so take their spelling from the YAML itself.
	if err := restoreNameCase(raw, &cfg); err != nil {
		return nil, err
	}
	if err := restoreAdminNames(raw, &cfg); err != nil {
		return nil, err
	}
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// durationFromNumber rejects a bare number for a duration (viper would read
// "period: 1" as one nanosecond), so that mistake names its key.
func durationFromNumber(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeOf(time.Duration(0)) || from == to {
		return data, nil
	}
	switch from.Kind() {
	case reflect.Int, reflect.Int64, reflect.Float64, reflect.Uint64, reflect.Int32:
		return nil, fmt.Errorf("a duration needs a unit, e.g. \"%vs\" or \"%vms\"", data, data)
	}
	return data, nil
}

// decodeError reports viper's decode errors: a *FieldError of a hook as
// "config: tenants.acme.outflow.rate: must be …", the others as mapstructure
// words them (cleanDecodeError).
func decodeError(err error) error {
	var errs []error
	var walk func(error)
	walk = func(e error) {
		var de *mapstructure.DecodeError
		var fe *FieldError
		switch j, ok := e.(interface{ Unwrap() []error }); {
		case ok:
			for _, x := range j.Unwrap() {
				walk(x)
			}
		case errors.As(e, &de) && errors.As(e, &fe):
			errs = append(errs, fmt.Errorf("config: %s.%s: %s", dottedKey(de.Name()), fe.Field, fe.Msg))
		default:
			errs = append(errs, fmt.Errorf("config: %w", cleanDecodeError(e)))
		}
	}
	walk(err)
	return errors.Join(errs...)
}

// dottedKey turns mapstructure's "tenants[acme].outflow" into
// "tenants.acme.outflow".
func dottedKey(name string) string {
	return strings.NewReplacer("[", ".", "]", "").Replace(name)
}

func cleanDecodeError(err error) error {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "decoding failed due to the following error(s):\n\n", "")
	msg = strings.ReplaceAll(msg, "has invalid keys", "has unknown keys")
	return errors.New(msg)
}

// checkNames checks the tenant ids and job types of raw against package
// keys' rules before viper reads them: viper takes "." in a key as nesting,
// so a name like ".." or "a.b" would otherwise surface as an unknown key
// far from its cause. A dotted name the rules allow ("a.b") cannot be
// written in the file for the same reason; the admin API takes it.
func checkNames(raw []byte) error {
	doc, err := parseNames(raw)
	if err != nil {
		return err
	}
	var errs []error
	dotted := func(key string) {
		errs = append(errs, fmt.Errorf("config: %s: a name with \".\" cannot be written in the configuration file (it reads \".\" as nesting); create this tenant through the admin API", key))
	}
	for name, t := range doc.Tenants {
		p := "tenants." + name
		switch {
		case !keys.ValidTenant(name):
			errs = append(errs, fmt.Errorf("config: %s: tenant id must be %s (got %q)", p, keys.TenantRule, name))
			continue
		case strings.Contains(name, "."):
			dotted(p)
			continue
		}
		for typ := range t.JobTypes {
			jp := p + ".job_types." + typ
			switch {
			case !keys.ValidID(typ):
				errs = append(errs, fmt.Errorf("config: %s: job type must be %s (got %q)", jp, keys.IDRule, typ))
			case strings.Contains(typ, "."):
				dotted(jp)
			}
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

// nameDoc is the part of the YAML file that names tenants and job types,
// read as written (viper lower-cases keys and reads "." as nesting).
type nameDoc struct {
	Tenants map[string]struct {
		JobTypes map[string]any `yaml:"job_types"`
	} `yaml:"tenants"`
}

func parseNames(raw []byte) (nameDoc, error) {
	var doc nameDoc
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return doc, fmt.Errorf("config: parse yaml: %w", err)
	}
	return doc, nil
}

// restoreNameCase renames tenants and job types to their spelling in raw.
func restoreNameCase(raw []byte, cfg *Config) error {
	if len(raw) == 0 {
		return nil
	}
	doc, err := parseNames(raw)
	if err != nil {
		return err
	}
	tenants := make(map[string]Tenant, len(cfg.Tenants))
	seen := map[string]string{}
	for name, spec := range doc.Tenants {
		low := strings.ToLower(name)
		if other, dup := seen[low]; dup {
			return fmt.Errorf("config: tenants.%s: same name as tenants.%s but for case; names differing only in case are not allowed", name, other)
		}
		seen[low] = name
		t := cfg.Tenants[low] // absent when the YAML gave it no keys
		if len(t.JobTypes) > 0 {
			types := make(map[string]JobType, len(t.JobTypes))
			for typ := range spec.JobTypes {
				if jt, ok := t.JobTypes[strings.ToLower(typ)]; ok {
					types[typ] = jt
				}
			}
			t.JobTypes = types
		}
		tenants[name] = t
	}
	cfg.Tenants = tenants
	return nil
}
