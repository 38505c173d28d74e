package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// kustomization is the part of a kustomization.yaml the tests read.
type kustomization struct {
	Namespace          string   `yaml:"namespace"`
	Resources          []string `yaml:"resources"`
	ConfigMapGenerator []struct {
		Name  string   `yaml:"name"`
		Files []string `yaml:"files"`
	} `yaml:"configMapGenerator"`
	Patches []struct {
		Path string `yaml:"path"`
	} `yaml:"patches"`
}

// object is one Kubernetes manifest, decoded loosely.
type object struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   objectMeta        `yaml:"metadata"`
	Spec       map[string]any    `yaml:"spec"`
	Data       map[string]string `yaml:"data"`
	raw        []byte
}

type objectMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

var kustomizations = []string{"k8s/base", "k8s/overlays/local"}

// TestKustomizationFiles checks, without kubectl, that every file a
// kustomization names exists and that every resource parses as manifests
// with apiVersion, kind and a name.
func TestKustomizationFiles(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			var k kustomization
			readYAML(t, filepath.Join(dir, "kustomization.yaml"), &k)
			if len(k.Resources) == 0 {
				t.Fatal("no resources")
			}
			for _, r := range k.Resources {
				path := filepath.Join(dir, r)
				st, err := os.Stat(path)
				if err != nil {
					t.Errorf("resource %s: %v", r, err)
					continue
				}
				if st.IsDir() {
					if _, err := os.Stat(filepath.Join(path, "kustomization.yaml")); err != nil {
						t.Errorf("resource %s: a folder without kustomization.yaml", r)
					}
					continue
				}
				for _, o := range readManifests(t, path) {
					if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
						t.Errorf("%s: a manifest without apiVersion, kind or metadata.name: %s", r, o.raw)
					}
				}
			}
			for _, g := range k.ConfigMapGenerator {
				for _, f := range g.Files {
					_, file, _ := strings.Cut(f, "=") // key=file or file
					if file == "" {
						file = f
					}
					if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
						t.Errorf("configMapGenerator %s: %v", g.Name, err)
					}
				}
			}
			for _, p := range k.Patches {
				if p.Path == "" {
					continue
				}
				raw, err := os.ReadFile(filepath.Join(dir, p.Path))
				if err != nil {
					t.Errorf("patch: %v", err)
					continue
				}
				var v any
				if err := yaml.Unmarshal(raw, &v); err != nil {
					t.Errorf("patch %s: %v", p.Path, err)
				}
			}
		})
	}
}

// TestBaseManifests checks the base's manifests as written (kubectl or not).
func TestBaseManifests(t *testing.T) {
	var objs []object
	var k kustomization
	readYAML(t, "k8s/base/kustomization.yaml", &k)
	for _, r := range k.Resources {
		objs = append(objs, readManifests(t, filepath.Join("k8s/base", r))...)
	}
	raw, err := os.ReadFile("k8s/base/sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, object{APIVersion: "v1", Kind: "ConfigMap", Metadata: objectMeta{Name: "sluice-config"}, Data: map[string]string{"sluice.yaml": string(raw)}})
	checkSluiceObjects(t, objs, "")
}

// TestKustomizeBuild renders each kustomization with kubectl kustomize and
// checks the result; it is skipped when kubectl is not installed (the file
// checks above still run).
func TestKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not on PATH: the kustomizations are checked as files only")
	}
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			cmd := exec.Command(kubectl, "kustomize", dir)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.Bytes())
			}
			objs := decodeManifests(t, dir, out)
			ns := ""
			if dir == "k8s/overlays/local" {
				ns = "sluice"
			}
			checkSluiceObjects(t, objs, ns)
		})
	}
}

// checkSluiceObjects checks the sluice objects among objs: both Deployments
// (replicas, probes, resources, security, scrape annotations, config
// mount), their Services and PDBs, and the configuration they would load.
// A non-empty namespace must be set on every namespaced object.
func checkSluiceObjects(t *testing.T, objs []object, namespace string) {
	t.Helper()
	byKind := map[string]map[string]object{}
	for _, o := range objs {
		if byKind[o.Kind] == nil {
			byKind[o.Kind] = map[string]object{}
		}
		byKind[o.Kind][o.Metadata.Name] = o
		if namespace != "" && o.Kind != "Namespace" && o.Metadata.Namespace != namespace {
			t.Errorf("%s/%s: namespace %q, want %q", o.Kind, o.Metadata.Name, o.Metadata.Namespace, namespace)
		}
	}
	var configMap object
	for name, o := range byKind["ConfigMap"] {
		if strings.HasPrefix(name, "sluice-config") {
			configMap = o
		}
	}
	if configMap.Data["sluice.yaml"] == "" {
		t.Fatalf("no ConfigMap sluice-config with sluice.yaml; ConfigMaps: %v", sortedKeys(byKind["ConfigMap"]))
	}
	for _, c := range []struct{ name, port string }{{"ingest", "8080"}, {"drainer", "8081"}} {
		d, ok := byKind["Deployment"][c.name]
		if !ok {
			t.Errorf("no Deployment %s; Deployments: %v", c.name, sortedKeys(byKind["Deployment"]))
			continue
		}
		var dep deployment
		if err := yaml.Unmarshal(d.raw, &dep); err != nil {
			t.Fatalf("Deployment %s: %v", c.name, err)
		}
		checkDeployment(t, c.name, c.port, dep, configMap)
		if _, ok := byKind["Service"][c.name]; !ok {
			t.Errorf("no Service %s", c.name)
		}
		if !selects(byKind["PodDisruptionBudget"], dep.Spec.Template.Metadata.Labels) {
			t.Errorf("no PodDisruptionBudget selects the %s pods", c.name)
		}
		for _, s := range byKind["Service"] {
			if s.Metadata.Name == c.name && !matches(s.Spec["selector"], dep.Spec.Template.Metadata.Labels) {
				t.Errorf("Service %s selector %v does not select the pods (labels %v)", c.name, s.Spec["selector"], dep.Spec.Template.Metadata.Labels)
			}
		}
	}
}

// selects reports whether one of pdbs selects pods with labels.
func selects(pdbs map[string]object, labels map[string]string) bool {
	for _, p := range pdbs {
		sel, _ := p.Spec["selector"].(map[string]any)
		if matches(sel["matchLabels"], labels) {
			return true
		}
	}
	return false
}

// matches reports whether the label selector sel (a map) is non-empty and
// every one of its labels is in labels.
func matches(sel any, labels map[string]string) bool {
	m, _ := sel.(map[string]any)
	if len(m) == 0 {
		return false
	}
	for k, v := range m {
		if labels[k] != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

func readManifests(t *testing.T, path string) []object {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifests(t, path, raw)
}

// decodeManifests splits a multi-document YAML stream into objects.
func decodeManifests(t *testing.T, where string, raw []byte) []object {
	t.Helper()
	var objs []object
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var o object
		if err := n.Decode(&o); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if o.Kind == "" && o.APIVersion == "" && len(o.Spec) == 0 {
			continue // an empty document
		}
		if o.raw, err = yaml.Marshal(&n); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	return objs
}
