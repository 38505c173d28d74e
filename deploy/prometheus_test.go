package deploy

import (
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// needPromtool returns promtool's path. Without it the test fails, unless
// SLUICE_SKIP_PROMTOOL=1 says to skip the checks that need it.
func needPromtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	if os.Getenv("SLUICE_SKIP_PROMTOOL") == "1" {
		t.Skip("promtool not on PATH and SLUICE_SKIP_PROMTOOL=1")
	}
	t.Fatal("promtool not on PATH: install it (apt-get install -y prometheus), or set SLUICE_SKIP_PROMTOOL=1 to skip the checks that need it")
	return ""
}

func runPromtool(t *testing.T, promtool string, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool, args...)
	cmd.Dir = "prometheus"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

const rulesPath = "prometheus/rules.yml"

func TestAlertRules(t *testing.T) {
	var rf ruleFile
	readYAML(t, rulesPath, &rf)
	if len(rf.Groups) == 0 {
		t.Fatalf("%s: no groups", rulesPath)
	}
	var alerts []string
	for _, g := range rf.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: want a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %q: a rule without alert (record %q); this file holds alerts", g.Name, r.Record)
				continue
			}
			alerts = append(alerts, r.Alert)
			if strings.TrimSpace(r.Expr) == "" || r.For == "" {
				t.Errorf("%s: expr %q, for %q: want both", r.Alert, r.Expr, r.For)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: annotations %v, want summary and description", r.Alert, r.Annotations)
			}
		}
	}
	for _, want := range []string{"SluiceBacklogGrowing", "SluiceBacklogNotConsumed", "SluiceDLQGrowing", "SluiceOutflowOffRate", "SluiceLimiterErrors", "SluiceTenantPaused"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alerts %v: %s missing", alerts, want)
		}
	}
}

func TestAlertRulesMetricsExist(t *testing.T) {
	var rf ruleFile
	readYAML(t, rulesPath, &rf)
	defined := sourceMetricNames(t)
	used := map[string][]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			text := r.Expr
			for _, a := range r.Annotations {
				text += "\n" + a // annotations name metrics to look at
			}
			for _, n := range queryMetricNames(text, defined) {
				used[n] = append(used[n], rulesPath+" "+r.Alert)
			}
		}
	}
	missingNames(t, "alert rules", used)
}

// TestPromtool checks the rules and both scrape configs with promtool, and
// runs the rules' unit tests (prometheus/rules_test.yml).
func TestPromtool(t *testing.T) {
	promtool := needPromtool(t)
	runPromtool(t, promtool, "check", "rules", "rules.yml")
	runPromtool(t, promtool, "test", "rules", "rules_test.yml")
	runPromtool(t, promtool, "check", "config", "prometheus.yml")
	runPromtool(t, promtool, "check", "config", "prometheus.compose.yml")
}

type scrapeConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

func (s scrapeConfig) targets(job string) []string {
	var out []string
	for _, sc := range s.ScrapeConfigs {
		if sc.JobName == job {
			for _, st := range sc.StaticConfigs {
				out = append(out, st.Targets...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestScrapeTargets checks that the local config scrapes where the local
// stack listens: ingest and the first drainer at their default listen
// addresses, the second drainer on the next port (make run starts it so).
func TestScrapeTargets(t *testing.T) {
	cfg, err := config.Parse(nil)
	if err != nil {
		t.Fatalf("default configuration: %v", err)
	}
	_, port, _ := net.SplitHostPort(cfg.Drainer.Listen)
	host, _, _ := net.SplitHostPort(cfg.Drainer.Listen)
	second := net.JoinHostPort(host, nextPort(t, port))

	var local scrapeConfig
	readYAML(t, "prometheus/prometheus.yml", &local)
	for _, c := range []struct {
		job  string
		want []string
	}{
		{"sluice-ingest", []string{cfg.Ingest.Listen}},
		{"sluice-drainer", []string{cfg.Drainer.Listen, second}},
	} {
		if got := local.targets(c.job); !slices.Equal(got, c.want) {
			t.Errorf("prometheus.yml job %s targets = %v, want %v", c.job, got, c.want)
		}
	}
	if !slices.Equal(local.RuleFiles, []string{"rules.yml"}) {
		t.Errorf("prometheus.yml rule_files = %v, want [rules.yml]", local.RuleFiles)
	}
}

func nextPort(t *testing.T, port string) string {
	t.Helper()
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("port %q: %v", port, err)
	}
	return strconv.Itoa(n + 1)
}
