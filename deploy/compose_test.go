package deploy

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string                    `yaml:"image"`
	Build       *struct{ Context string } `yaml:"build"`
	Command     []string                  `yaml:"command"`
	Environment map[string]string         `yaml:"environment"`
	Ports       []string                  `yaml:"ports"`
	Volumes     []string                  `yaml:"volumes"`
	DependsOn   dependsOn                 `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// dependsOn is compose's depends_on in either form: a list of services, or
// a map of service to {condition}.
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	*d = dependsOn{}
	if n.Kind == yaml.SequenceNode {
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		for _, s := range names {
			(*d)[s] = "service_started"
		}
		return nil
	}
	var m map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	for s, c := range m {
		(*d)[s] = c.Condition
	}
	return nil
}

const composePath = root + "/docker-compose.yml"

func readCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	readYAML(t, composePath, &c)
	return c
}

// interpolation is compose's ${NAME}, ${NAME:-default} and ${NAME-default}.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}`)

// resolve replaces each interpolation by its default, as compose does when
// the variable is not set.
func resolve(s string) string {
	return interpolation.ReplaceAllString(s, "$2")
}

// splitVolume splits "host:container[:mode]".
func splitVolume(v string) (host, container, mode string) {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) < 2 {
		return "", v, ""
	}
	if len(parts) == 3 {
		mode = parts[2]
	}
	return parts[0], parts[1], mode
}

// publishedPorts maps each container port of svc to its host port.
func publishedPorts(t *testing.T, name string, svc composeService) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, p := range svc.Ports {
		parts := strings.Split(p, ":")
		if len(parts) != 2 {
			t.Errorf("%s: port %q, want HOST:CONTAINER", name, p)
			continue
		}
		m[parts[1]] = parts[0]
	}
	return m
}

// sluiceServices are the services that run the sluice image, with the
// command each must run.
var sluiceServices = map[string]string{
	"ingest":    "ingest",
	"drainer-1": "drainer",
	"drainer-2": "drainer",
	"demosink":  "demosink",
}

func TestComposeServices(t *testing.T) {
	c := readCompose(t)
	want := []string{"demosink", "drainer-1", "drainer-2", "grafana", "ingest", "kafka", "prometheus", "redis"}
	if got := sortedKeys(c.Services); !slices.Equal(got, want) {
		t.Errorf("services = %v, want %v", got, want)
	}
	// Host ports are the local stack's, so that scripts and docs work with either.
	wantHost := map[string]string{
		"ingest": "8080", "drainer-1": "8081", "drainer-2": "8082", "demosink": "9000",
		"redis": "6379", "prometheus": "9090", "grafana": "3000",
	}
	for name, host := range wantHost {
		var got []string
		for _, h := range publishedPorts(t, name, c.Services[name]) {
			got = append(got, h)
		}
		if !slices.Contains(got, host) {
			t.Errorf("%s publishes host ports %v, want %s (the local stack's)", name, got, host)
		}
	}
	for name, svc := range c.Services {
		for dep, cond := range svc.DependsOn {
			target, ok := c.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on %s, which is not a service", name, dep)
			case cond == "service_healthy" && target.Healthcheck == nil:
				t.Errorf("%s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep)
			}
		}
		for _, v := range svc.Volumes {
			host, _, _ := splitVolume(v)
			if !strings.HasPrefix(host, ".") {
				continue // a named volume
			}
			if _, err := os.Stat(filepath.Join(root, host)); err != nil {
				t.Errorf("%s mounts %s: %v", name, host, err)
			}
		}
	}
}

// TestComposeSluiceEnvironment loads the configuration each sluice service
// would, with its environment, and checks that it reaches the other
// services: Redis, Kafka and the demo sink by service name, listeners on
// all interfaces on the published ports.
func TestComposeSluiceEnvironment(t *testing.T) {
	c := readCompose(t)
	for _, name := range []string{"ingest", "drainer-1", "drainer-2"} {
		t.Run(name, func(t *testing.T) {
			svc := c.Services[name]
			env := map[string]string{}
			for k, v := range svc.Environment {
				env[k] = resolve(v)
			}
			path := hostPath(t, svc, env["SLUICE_CONFIG"])
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("SLUICE_CONFIG: %v", err)
			}
			checkEnvNames(t, name, env, configEnvNames(t, raw))
			if _, ok := svc.Environment["SLUICE_QUEUE_BACKEND"]; !ok {
				t.Error("no SLUICE_QUEUE_BACKEND: the backend should be chosen when starting the stack")
			}
			// Both backends run in the stack; the configuration must load with
			// either (the default and SLUICE_QUEUE_BACKEND=kafka).
			kafkaEnv := maps.Clone(env)
			kafkaEnv["SLUICE_QUEUE_BACKEND"] = "kafka"
			if cfg := loadWithEnv(t, path, kafkaEnv); cfg.Queue.Backend != "kafka" {
				t.Errorf("with SLUICE_QUEUE_BACKEND=kafka, queue.backend = %q", cfg.Queue.Backend)
			}
			cfg := loadWithEnv(t, path, env)
			if len(cfg.Redis.ClusterAddrs) > 0 {
				t.Errorf("redis.cluster_addrs = %v, want the redis service", cfg.Redis.ClusterAddrs)
			}
			checkReaches(t, c, "redis.addr", cfg.Redis.Addr, "redis", "6379")
			for _, b := range cfg.Kafka.Brokers {
				checkReaches(t, c, "kafka.brokers", b, "kafka", "9092")
			}
			listen := cfg.Drainer.Listen
			if name == "ingest" {
				listen = cfg.Ingest.Listen
			}
			host, port, err := net.SplitHostPort(listen)
			if err != nil || (host != "0.0.0.0" && host != "") {
				t.Errorf("listen %q: want 0.0.0.0:PORT, reachable from the other containers", listen)
			}
			if _, ok := publishedPorts(t, name, svc)[port]; !ok {
				t.Errorf("listens on port %s, but publishes %v", port, svc.Ports)
			}
			sinkPort := flagValue(c.Services["demosink"].Command, "--listen")
			_, sinkPort, _ = net.SplitHostPort(sinkPort)
			for tenant, tc := range cfg.Tenants {
				u, err := url.Parse(tc.Target.URL)
				if err != nil {
					t.Fatalf("tenants.%s.target.url: %v", tenant, err)
				}
				checkReaches(t, c, "tenants."+tenant+".target.url host", u.Host, "demosink", sinkPort)
				for typ, jt := range tc.JobTypes {
					if jt.Target.URL != "" {
						t.Errorf("tenants.%s.job_types.%s.target.url = %q: a job-type target the compose file does not point at the demo sink", tenant, typ, jt.Target.URL)
					}
				}
			}
		})
	}
}

// checkReaches checks that addr is service:port.
func checkReaches(t *testing.T, c composeFile, key, addr, service, port string) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil || host != service || p != port {
		t.Errorf("%s = %q, want %s:%s (the %s service)", key, addr, service, port, service)
	}
	if _, ok := c.Services[service]; !ok {
		t.Errorf("%s: no service %s", key, service)
	}
}

// hostPath is the file on the host that a container path of svc is,
// through svc's bind mounts.
func hostPath(t *testing.T, svc composeService, ctrPath string) string {
	t.Helper()
	for _, v := range svc.Volumes {
		host, ctr, _ := splitVolume(v)
		if rel, ok := strings.CutPrefix(ctrPath, ctr+"/"); ok && strings.HasPrefix(host, ".") {
			return filepath.Join(root, host, rel)
		}
		if ctrPath == ctr && strings.HasPrefix(host, ".") {
			return filepath.Join(root, host)
		}
	}
	t.Fatalf("%s is not in any bind mount of %v", ctrPath, svc.Volumes)
	return ""
}

func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// TestComposePrometheus checks that the compose Prometheus gets
// prometheus.compose.yml with rules.yml beside it, and that its targets are
// the sluice services on their container ports.
func TestComposePrometheus(t *testing.T) {
	c := readCompose(t)
	prom := c.Services["prometheus"]
	mounts := map[string]string{}
	for _, v := range prom.Volumes {
		host, ctr, _ := splitVolume(v)
		mounts[ctr] = filepath.Clean(host)
	}
	want := map[string]string{
		"/etc/prometheus/prometheus.yml": "deploy/prometheus/prometheus.compose.yml",
		"/etc/prometheus/rules.yml":      "deploy/prometheus/rules.yml",
	}
	for ctr, host := range want {
		if mounts[ctr] != host {
			t.Errorf("prometheus mounts %v at %s, want ./%s", mounts[ctr], ctr, host)
		}
	}
	if !slices.Contains(prom.Command, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Errorf("prometheus command %v: want --config.file=/etc/prometheus/prometheus.yml", prom.Command)
	}

	var sc scrapeConfig
	readYAML(t, "prometheus/prometheus.compose.yml", &sc)
	port := func(svc string) string {
		for ctr := range publishedPorts(t, svc, c.Services[svc]) {
			return ctr
		}
		return ""
	}
	for job, services := range map[string][]string{
		"sluice-ingest":  {"ingest"},
		"sluice-drainer": {"drainer-1", "drainer-2"},
	} {
		var wantTargets []string
		for _, s := range services {
			wantTargets = append(wantTargets, fmt.Sprintf("%s:%s", s, port(s)))
		}
		if got := sc.targets(job); !slices.Equal(got, wantTargets) {
			t.Errorf("prometheus.compose.yml job %s targets = %v, want %v", job, got, wantTargets)
		}
	}
}
