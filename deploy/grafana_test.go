package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Annotations   struct {
		List []struct {
			Name       string      `json:"name"`
			Expr       string      `json:"expr"`
			Datasource *datasource `json:"datasource"`
		} `json:"list"`
	} `json:"annotations"`
	Templating struct {
		List []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Panels     []panel `json:"panels"` // a row's panels when collapsed
	Targets    []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

const dashboardPath = "grafana/sluice.json"

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return d
}

// allPanels flattens rows into their panels.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// dashboardQueries returns every PromQL expression of d (panel targets,
// the query variables and the Prometheus annotations), each with where it
// is.
func dashboardQueries(d dashboard) map[string]string {
	q := map[string]string{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			q[fmt.Sprintf("panel %q target %s", p.Title, tg.RefID)] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var s struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &s); err != nil {
			_ = json.Unmarshal(v.Query, &s.Query) // older dashboards: a plain string
		}
		q["variable "+v.Name] = s.Query
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			q["annotation "+a.Name] = a.Expr
		}
	}
	return q
}

func TestDashboardStructure(t *testing.T) {
	d := readDashboard(t)
	for _, a := range d.Annotations.List {
		if a.Expr != "" && (a.Datasource == nil || a.Datasource.UID != "${datasource}") {
			t.Errorf("annotation %q: datasource %+v, want uid ${datasource}", a.Name, a.Datasource)
		}
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both set (provisioning keys on the uid)", d.UID, d.Title)
	}
	if d.SchemaVersion < 36 || d.SchemaVersion > 41 {
		t.Errorf("schemaVersion = %d, want 36..41 (Grafana 10-12)", d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Name == "datasource" && (v.Type != "datasource" || string(v.Query) != `"prometheus"`) {
			t.Errorf("variable datasource = type %q query %s, want a datasource variable of type prometheus", v.Type, v.Query)
		}
	}
	if vars["datasource"] != "datasource" || vars["tenant"] != "query" {
		t.Errorf("variables = %v, want datasource:datasource and tenant:query", vars)
	}
	if q := dashboardQueries(d)["variable tenant"]; !strings.HasPrefix(q, "label_values(") || !strings.HasSuffix(q, ", tenant)") {
		t.Errorf("tenant variable query = %q, want label_values(<metric>, tenant)", q)
	}

	ids := map[int]string{}
	for _, p := range allPanels(d.Panels) {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panel %q: id %d also used by %q", p.Title, p.ID, other)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos x=%d w=%d does not fit the 24 columns", p.Title, p.GridPos.X, p.GridPos.W)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want uid ${datasource}", p.Title, p.Datasource)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %s: empty expr", p.Title, tg.RefID)
			}
			if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q target %s: datasource %+v, want uid ${datasource}", p.Title, tg.RefID, tg.Datasource)
			}
		}
	}
}

// TestDashboardCoversTheIssue checks that the panels the issue asks for are
// there, by the metric each must query.
func TestDashboardCoversTheIssue(t *testing.T) {
	var all strings.Builder
	for _, q := range dashboardQueries(readDashboard(t)) {
		all.WriteString(q + "\n")
	}
	for _, want := range []struct{ what, query string }{
		{"queue depth per tenant", "sluice_queue_depth{"},
		{"outflow measured rate", "sluice_outflow_measured_rate{"},
		{"outflow configured rate", "sluice_outflow_configured_rate{"},
		{"outflow effective rate", "sluice_outflow_effective_rate{"},
		{"admission decisions by result", "by (result) (rate(sluice_admission_decisions_total"},
		{"consumer lag per partition", "partition) (sluice_consumer_lag"},
		{"retries", "sluice_retries_total"},
		{"DLQ", "sluice_dlq_total"},
		{"water level", "sluice_water_level{"},
		{"dispatch latency p99", "histogram_quantile(0.99, sum by (le) (rate(sluice_dispatch_duration_seconds_bucket"},
		{"fail-open", "sluice_fail_open_total{"},
		{"refused admissions by tenant", `sum by (tenant) (rate(sluice_admission_decisions_total{tenant=~"$tenant",result=~"denied|backlog"}`},
		{"paused tenants", "max by (tenant) (sluice_outflow_paused{"},
	} {
		if !strings.Contains(all.String(), want.query) {
			t.Errorf("no panel for %s: no query contains %q", want.what, want.query)
		}
	}
}

func TestDashboardMetricsExist(t *testing.T) {
	defined := sourceMetricNames(t)
	used := map[string][]string{}
	for where, q := range dashboardQueries(readDashboard(t)) {
		for _, n := range queryMetricNames(q, defined) {
			used[n] = append(used[n], dashboardPath+" "+where)
		}
	}
	if len(used) == 0 {
		t.Fatal("the dashboard queries no sluice metric")
	}
	missingNames(t, "dashboard queries", used)
}

// TestDashboardQueriesParse has promtool parse every dashboard query, as a
// recording rule, with Grafana's variables replaced by values.
func TestDashboardQueriesParse(t *testing.T) {
	promtool := needPromtool(t)
	replacer := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$tenant", ".*")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	queries := dashboardQueries(readDashboard(t))
	for _, where := range sortedKeys(queries) {
		q := queries[where]
		if strings.HasPrefix(q, "label_values(") {
			// label_values(selector, label): Grafana's, not PromQL; its
			// selector is.
			sel, _, _ := strings.Cut(strings.TrimPrefix(q, "label_values("), ", ")
			q = sel
		}
		if strings.Contains(replacer.Replace(q), "$") {
			t.Errorf("%s: unknown Grafana variable in %q", where, q)
		}
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", len(rules)), Expr: replacer.Replace(q)})
	}
	doc := map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}}
	raw, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard_queries.yml")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, promtool, "check", "rules", file)
}

func TestGrafanaProvisioning(t *testing.T) {
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, URL string
		} `yaml:"datasources"`
	}
	readYAML(t, "grafana/provisioning/datasources/prometheus.yaml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("datasources = %+v, want one of type prometheus at http://prometheus:9090 (the compose service)", ds.Datasources)
	}
	var dash struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "grafana/provisioning/dashboards/sluice.yaml", &dash)
	if len(dash.Providers) != 1 || dash.Providers[0].Type != "file" || dash.Providers[0].Options.Path == "" {
		t.Fatalf("providers = %+v, want one file provider with a path", dash.Providers)
	}
	// docker-compose.yml must mount the dashboard into the provider's folder.
	grafana := readCompose(t).Services["grafana"]
	want := dash.Providers[0].Options.Path + "/sluice.json"
	mounted := false
	for _, v := range grafana.Volumes {
		host, ctr, _ := splitVolume(v)
		if ctr == want && filepath.Clean(host) == filepath.Join(".", "deploy", dashboardPath) {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("grafana volumes %v do not mount ./deploy/%s at %s, the provider's folder", grafana.Volumes, dashboardPath, want)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
