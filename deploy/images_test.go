package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestComposeImages checks the images compose runs: Kafka at the version
// deploy/local/services.sh runs, in KRaft mode; redis:7; sluice's own image,
// built from the repository, for each sluice service.
func TestComposeImages(t *testing.T) {
	c := readCompose(t)
	kafka := c.Services["kafka"]
	if want := "apache/kafka:" + localKafkaVersion(t); kafka.Image != want {
		t.Errorf("kafka image = %q, want %q (the version deploy/local/services.sh runs)", kafka.Image, want)
	}
	roles := strings.Split(kafka.Environment["KAFKA_PROCESS_ROLES"], ",")
	if !slices.Contains(roles, "broker") || !slices.Contains(roles, "controller") || kafka.Environment["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "" {
		t.Errorf("kafka environment %v: want KRaft (KAFKA_PROCESS_ROLES broker,controller and a quorum)", kafka.Environment)
	}
	for name, svc := range c.Services {
		if strings.Contains(svc.Image, "zookeeper") {
			t.Errorf("%s: image %s; Kafka runs in KRaft mode, without ZooKeeper", name, svc.Image)
		}
	}
	if img := c.Services["redis"].Image; img != "redis:7" && !strings.HasPrefix(img, "redis:7.") {
		t.Errorf("redis image = %q, want redis:7", img)
	}
	for name, cmd := range sluiceServices {
		svc := c.Services[name]
		if svc.Image != "sluice:latest" || svc.Build == nil || svc.Build.Context != "." {
			t.Errorf("%s: image %q build %+v, want sluice:latest built from .", name, svc.Image, svc.Build)
		}
		if want := "/usr/local/bin/" + cmd; len(svc.Command) == 0 || svc.Command[0] != want {
			t.Errorf("%s: command %v, want %s first", name, svc.Command, want)
		}
		checkMainPackage(t, cmd)
	}
}

// localKafkaVersion is the default KAFKA_VERSION of deploy/local/services.sh.
func localKafkaVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("local/services.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KAFKA_VERSION=\$\{SLUICE_KAFKA_VERSION:-([0-9.]+)\}`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("deploy/local/services.sh: no KAFKA_VERSION=${SLUICE_KAFKA_VERSION:-x.y.z} line")
	}
	return string(m[1])
}

// checkMainPackage checks that cmd/<name> holds a main package, which the
// Dockerfile's go build ./cmd/... puts at /usr/local/bin/<name>.
func checkMainPackage(t *testing.T, name string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "cmd", name, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err == nil && regexp.MustCompile(`(?m)^package main\b`).Match(raw) {
			return
		}
	}
	t.Errorf("cmd/%s has no main package, so the image has no /usr/local/bin/%s", name, name)
}

// TestDockerfile checks the image's build: a golang:1.26 builder that builds
// every command, and a runtime stage without Go that runs as a non-root user.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	var user string
	build := false
	// Continuation lines (ending in \) make one instruction.
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			stages = append(stages, fields[1])
			user = ""
		case "USER":
			user = fields[1]
		case "RUN":
			if strings.Contains(line, "go build") && strings.Contains(line, "./cmd/...") {
				build = true
			}
		}
	}
	if len(stages) < 2 || !strings.HasPrefix(stages[0], "golang:1.26") {
		t.Errorf("stages %v: want a golang:1.26 builder and a runtime stage", stages)
	}
	if len(stages) > 0 && strings.HasPrefix(stages[len(stages)-1], "golang") {
		t.Errorf("runtime stage %s: want distroless or debian-slim, not the Go image", stages[len(stages)-1])
	}
	if !build {
		t.Error("no RUN go build ... ./cmd/...: every command must be in the image")
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "root" || uid == "0" {
		t.Errorf("runtime USER %q, want a non-root user", user)
	}
}
