package deploy

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/config"
)

// root is the repository, seen from this package's folder.
const root = ".."

var (
	metricNamesOnce sync.Once
	metricNames     map[string]string // name → file that defines it
	metricNamesErr  error
)

// sourceMetricNames returns every Go string literal of the repository that
// is a whole sluice metric name (sluice_ and [a-z0-9_]), with the file it is
// in. Test files and this package are left out, so a name only a test
// mentions does not count as defined.
func sourceMetricNames(t *testing.T) map[string]string {
	t.Helper()
	metricNamesOnce.Do(func() {
		metricNames, metricNamesErr = scanMetricNames(root)
	})
	if metricNamesErr != nil {
		t.Fatalf("scan Go source for metric names: %v", metricNamesErr)
	}
	return metricNames
}

var wholeName = regexp.MustCompile(`^sluice_[a-z0-9_]+$`)

func scanMetricNames(dir string) (map[string]string, error) {
	names := map[string]string{}
	self, err := filepath.Abs(".")
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != dir && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if abs, _ := filepath.Abs(filepath.Dir(path)); abs == self {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		var s scanner.Scanner
		s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
		for {
			_, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok != token.STRING {
				continue
			}
			if v, err := strconv.Unquote(lit); err == nil && wholeName.MatchString(v) {
				rel, _ := filepath.Rel(root, path)
				names[v] = rel
			}
		}
		return nil
	})
	return names, err
}

var nameInQuery = regexp.MustCompile(`sluice_[a-z0-9_]+`)

// queryMetricNames returns the sluice metric names text mentions, with the
// _bucket, _sum and _count series of a histogram mapped to the histogram's
// name when that name is defined.
func queryMetricNames(text string, defined map[string]string) []string {
	var names []string
	for _, n := range nameInQuery.FindAllString(text, -1) {
		if _, ok := defined[n]; !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, cut := strings.CutSuffix(n, suffix); cut {
					if _, ok := defined[base]; ok {
						n = base
						break
					}
				}
			}
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// missingNames checks that every name used (name → where it is used) is
// defined in the Go source, and reports the missing ones in one message.
func missingNames(t *testing.T, what string, used map[string][]string) {
	t.Helper()
	defined := sourceMetricNames(t)
	var missing []string
	for name, where := range used {
		if _, ok := defined[name]; !ok {
			missing = append(missing, name+" (used by "+strings.Join(where, "; ")+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s use %d metric names that no Go source file defines (as a string literal outside tests):\n  %s\nmetrics defined in the source: %s",
			what, len(missing), strings.Join(missing, "\n  "), strings.Join(sortedKeys(defined), ", "))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// configEnvNames maps each SLUICE_* variable that overrides a key of the
// configuration in yamlFile (the keys of config.Config, plus the tenant and
// job type keys the file has) to its key, with SLUICE_CONFIG, which names the
// file itself.
func configEnvNames(t *testing.T, yamlFile []byte) map[string]string {
	t.Helper()
	keys := map[string]bool{}
	structKeys(reflect.TypeOf(config.Config{}), "", keys)
	var doc map[string]any
	if err := yaml.Unmarshal(yamlFile, &doc); err != nil {
		t.Fatalf("parse configuration: %v", err)
	}
	flattenYAML(doc, "", keys)
	env := map[string]string{config.EnvPrefix + "_CONFIG": "(the configuration file)"}
	for k := range keys {
		env[config.EnvPrefix+"_"+strings.ToUpper(strings.ReplaceAll(k, ".", "_"))] = k
	}
	return env
}

// structKeys adds the dotted mapstructure keys of typ's leaves; maps (tenants,
// job types) have names only a file can give, so they are left to flattenYAML.
func structKeys(typ reflect.Type, prefix string, keys map[string]bool) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := prefix + name
		switch f.Type.Kind() {
		case reflect.Struct:
			structKeys(f.Type, key+".", keys)
		case reflect.Map:
		default:
			keys[key] = true
		}
	}
}

// flattenYAML adds the dotted, lower-cased (as viper folds them) key of every
// leaf of doc.
func flattenYAML(doc map[string]any, prefix string, keys map[string]bool) {
	for k, v := range doc {
		key := prefix + strings.ToLower(k)
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			flattenYAML(sub, key+".", keys)
			continue
		}
		keys[key] = true
	}
}

// loadWithEnv parses the configuration file at path with the SLUICE_*
// variables of env set (and no others), as config.Load would in a container
// given that environment.
func loadWithEnv(t *testing.T, path string, env map[string]string) *config.Config {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, config.EnvPrefix+"_") {
			t.Setenv(name, "") // restored after the test
			os.Unsetenv(name)
		}
	}
	for k, v := range env {
		if k != config.EnvPrefix+"_CONFIG" {
			t.Setenv(k, v)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read configuration: %v", err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatalf("%s with the environment %v does not load: %v", path, env, err)
	}
	return cfg
}

// checkEnvNames reports SLUICE_* variables of env (where says whose) that
// override no configuration key: viper would ignore them silently.
func checkEnvNames(t *testing.T, where string, env map[string]string, known map[string]string) {
	t.Helper()
	for name := range env {
		if !strings.HasPrefix(name, config.EnvPrefix+"_") {
			continue
		}
		if _, ok := known[name]; !ok {
			t.Errorf("%s: %s overrides no configuration key (known: %s)", where, name, strings.Join(sortedKeys(known), ", "))
		}
	}
}
