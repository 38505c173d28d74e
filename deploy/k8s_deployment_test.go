package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// deployment is the part of a Deployment manifest the checks read.
type deployment struct {
	Spec struct {
		Replicas int `yaml:"replicas"`
		Template struct {
			Metadata objectMeta `yaml:"metadata"`
			Spec     struct {
				SecurityContext struct {
					RunAsNonRoot *bool `yaml:"runAsNonRoot"`
					RunAsUser    *int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Containers []container `yaml:"containers"`
				Volumes    []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Env     []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

func checkDeployment(t *testing.T, name, port string, d deployment, configMap object) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if d.Spec.Replicas != 2 {
		t.Errorf("%s: replicas %d, want 2", name, d.Spec.Replicas)
	}
	if sc := spec.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("%s: pod securityContext runAsNonRoot=%s runAsUser=%s, want true and a non-zero uid", name, show(sc.RunAsNonRoot), show(sc.RunAsUser))
	}
	ann := d.Spec.Template.Metadata.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != port || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("%s: pod annotations %v, want prometheus.io/scrape true, port %s, path /metrics", name, ann, port)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", name, len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != "sluice:latest" || len(c.Command) == 0 || c.Command[0] != "/usr/local/bin/"+name {
		t.Errorf("%s: image %q command %v, want sluice:latest running /usr/local/bin/%s", name, c.Image, c.Command, name)
	}
	if len(c.Ports) != 1 || fmt.Sprint(c.Ports[0].ContainerPort) != port {
		t.Errorf("%s: ports %+v, want the one container port %s", name, c.Ports, port)
	}
	for _, p := range []struct {
		name, path string
		probe      *probe
	}{{"readinessProbe", "/readyz", c.ReadinessProbe}, {"livenessProbe", "/healthz", c.LivenessProbe}} {
		got := ""
		if p.probe != nil && p.probe.HTTPGet != nil {
			got = p.probe.HTTPGet.Path
		}
		if got != p.path {
			t.Errorf("%s: %s path %q, want httpGet %s", name, p.name, got, p.path)
		}
	}
	for _, res := range []string{"cpu", "memory"} {
		if c.Resources.Requests[res] == "" || c.Resources.Limits[res] == "" {
			t.Errorf("%s: resources %+v, want requests and limits of %s", name, c.Resources, res)
		}
	}
	sc := c.SecurityContext
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: container securityContext readOnlyRootFilesystem=%s allowPrivilegeEscalation=%s, want true and false", name, show(sc.ReadOnlyRootFilesystem), show(sc.AllowPrivilegeEscalation))
	}

	// The config: SLUICE_CONFIG is a file of the mounted ConfigMap, which
	// loads with the container's environment and listens on all interfaces
	// on the container port.
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	cfgPath := env["SLUICE_CONFIG"]
	mountedAt := ""
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == configMap.Metadata.Name {
				mountedAt = m.MountPath
			}
		}
	}
	if mountedAt == "" || cfgPath != mountedAt+"/sluice.yaml" {
		t.Fatalf("%s: SLUICE_CONFIG %q, ConfigMap %s mounted at %q: want SLUICE_CONFIG to be its sluice.yaml", name, cfgPath, configMap.Metadata.Name, mountedAt)
	}
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(file, []byte(configMap.Data["sluice.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	checkEnvNames(t, name, env, configEnvNames(t, []byte(configMap.Data["sluice.yaml"])))
	cfg := loadWithEnv(t, file, env)
	listen := cfg.Drainer.Listen
	if name == "ingest" {
		listen = cfg.Ingest.Listen
	}
	if listen != "0.0.0.0:"+port {
		t.Errorf("%s: listens on %q, want 0.0.0.0:%s", name, listen, port)
	}
}

// show prints *p, or "unset".
func show[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
