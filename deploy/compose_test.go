package deploy

import (
	"bytes"
	"cmp"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/config"
	"gopkg.in/yaml.v3"
)

// composeFile is the part of the Compose specification docker-compose.yml uses; decoding
// rejects any other field.
type composeFile struct {
	XService yaml.Node                 `yaml:"x-service"`
	XVolumes yaml.Node                 `yaml:"x-volumes"`
	XEnv     yaml.Node                 `yaml:"x-env"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]struct{}       `yaml:"volumes"`
}

type composeService struct {
	Image       string                      `yaml:"image"`
	Build       *composeBuild               `yaml:"build"`
	Command     []string                    `yaml:"command"`
	Restart     string                      `yaml:"restart"`
	Ports       []string                    `yaml:"ports"`
	Volumes     []string                    `yaml:"volumes"`
	Environment map[string]string           `yaml:"environment"`
	Healthcheck *composeHealthcheck         `yaml:"healthcheck"`
	DependsOn   map[string]composeCondition `yaml:"depends_on"`
	// StopGracePeriod is how long Compose waits after SIGTERM before it kills the container;
	// empty means 10s.
	StopGracePeriod string `yaml:"stop_grace_period"`
}

type composeBuild struct {
	Context    string            `yaml:"context"`
	Dockerfile string            `yaml:"dockerfile"`
	Target     string            `yaml:"target"`
	Args       map[string]string `yaml:"args"`
}

type composeHealthcheck struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	Retries     int      `yaml:"retries"`
	StartPeriod string   `yaml:"start_period"`
}

type composeCondition struct {
	Condition string `yaml:"condition"`
}

// readCompose decodes docker-compose.yml strictly.
func readCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f composeFile
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("docker-compose.yml does not decode: %v", err)
	}
	return f
}

// TestComposeMatchesTheBinaries (issue 14.5): docker-compose.yml sets on each service only
// variables its binary reads, the same ones with the same values as the Kubernetes dev
// overlay, dials addresses of services and ports that exist, mounts a configuration that loads,
// keeps the memory store on a volume and checks every service's health.
func TestComposeMatchesTheBinaries(t *testing.T) {
	f := readCompose(t)
	dev := render(t, "k8s/overlays/dev")
	for _, name := range meshServices {
		s, ok := f.Services[name]
		if !ok {
			t.Errorf("docker-compose.yml has no service %s", name)
			continue
		}
		t.Run(name, func(t *testing.T) { checkComposeService(t, f, dev, name, s) })
	}

	// The memory store survives the container: memory.path is on a named volume.
	memory := f.Services["memory"]
	root := t.TempDir()
	var storeVolume string
	for _, v := range memory.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		dst, _, _ = strings.Cut(dst, ":")
		if strings.HasPrefix(src, "./") {
			text, err := os.ReadFile(filepath.Join(repoRoot, src))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(root, dst), string(text))
		} else if _, ok := f.Volumes[src]; ok {
			storeVolume = dst
		}
	}
	cfg, err := config.LoadLayers([]config.Layer{
		{Name: "explicit", Path: filepath.Join(root, memory.Environment["AGENTMESH_CONFIG"]), Required: true},
		{Name: "system", Path: filepath.Join(root, "/etc/agentmesh", config.FileName)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Memory.Store != config.StoreSQLite || storeVolume == "" || filepath.Dir(cfg.Memory.Path) != storeVolume {
		t.Errorf("memory keeps its store (%s %q) off the named volume (%q)", cfg.Memory.Store, cfg.Memory.Path, storeVolume)
	}
	if p := f.Services["orchestrator"].Ports; !slices.Equal(p, []string{"127.0.0.1:7000:7000"}) {
		t.Errorf("orchestrator publishes %v, want its LISTEN_ADDR port 7000 on loopback", p)
	}
}

// TestComposePublishesOnLoopbackOnly: every port docker-compose.yml publishes is bound to the
// host's loopback. Its services run AGENTMESH_INSECURE=1, the public API without
// authentication and with the development approval key pair, and Jaeger's UI shows every
// trace; a port published without an address is bound to every interface of the host (past
// its firewall, in Docker's own rules), so anyone on the network ran agents, approved their
// calls, and spent the developer's model keys.
func TestComposePublishesOnLoopbackOnly(t *testing.T) {
	f := readCompose(t)
	for _, name := range slices.Sorted(maps.Keys(f.Services)) {
		for _, p := range f.Services[name].Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %q on every interface of the host, want 127.0.0.1:%s", name, p, p)
			}
		}
	}
}

// checkComposeService checks the compose service of the binary name against the binary, the
// other services and the dev overlay's Deployment.
func checkComposeService(t *testing.T, f composeFile, dev *rendered, name string, s composeService) {
	target := "service"
	if name == "action" {
		target = "action"
	}
	if s.Build == nil || s.Build.Args["SERVICE"] != name || s.Build.Target != target || s.Build.Dockerfile != "deploy/Dockerfile" {
		t.Errorf("%s is not built from deploy/Dockerfile with SERVICE=%s, target %s: %+v", name, name, target, s.Build)
	}
	if s.Healthcheck == nil || !slices.Equal(s.Healthcheck.Test, append([]string{"CMD"}, healthExec...)) {
		t.Errorf("%s: healthcheck %+v, want the binary's health command", name, s.Healthcheck)
	}

	root, refs := t.TempDir(), map[string]bool{}
	for _, v := range s.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		dst, _, _ = strings.Cut(dst, ":")
		if !strings.HasPrefix(src, "./") {
			if _, ok := f.Volumes[src]; !ok {
				t.Errorf("%s mounts the volume %s, which is not declared", name, src)
			}
			continue
		}
		text, err := os.ReadFile(filepath.Join(repoRoot, src))
		if err != nil {
			t.Errorf("%s mounts %s: %v", name, src, err)
			continue
		}
		writeFile(t, filepath.Join(root, dst), string(text))
		for ref := range configRefs(string(text)) {
			refs[ref] = true
		}
	}
	var names []string
	for k := range s.Environment {
		names = append(names, k)
	}
	checkEnvRead(t, "docker-compose.yml's "+name, name, names, refs)
	cfg := checkConfigLoads(t, name, root, s.Environment)
	// Compose kills a container 10s after SIGTERM unless stop_grace_period says otherwise: on
	// every `docker compose stop`, `down` or `up` of a new image, a binary must have the time
	// to drain (the orchestrator to hand its runs off first, the memory stage to finish its
	// learning) and flush its spans.
	drain := drainTimeout(t, name, cfg, s.Environment)
	want := drain + spanFlush
	if drainsFirst[name] {
		want += drain
	}
	if grace, err := time.ParseDuration(cmp.Or(s.StopGracePeriod, "10s")); err != nil || grace <= want {
		t.Errorf("%s: stop_grace_period %q, want more than the %v the binary may take to stop", name, s.StopGracePeriod, want)
	}

	d := dev.deployments[name]
	if d == nil {
		t.Fatalf("the dev overlay has no Deployment %s", name)
	}
	manifest := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			manifest[e.Name] = e.Value
		}
	}
	for k, v := range manifest {
		if got, ok := s.Environment[k]; !ok || got != v {
			t.Errorf("%s: the dev overlay sets %s=%q, docker-compose.yml %q", name, k, v, got)
		}
	}
	for k, v := range s.Environment {
		if _, ok := manifest[k]; !ok {
			t.Errorf("%s: docker-compose.yml sets %s=%q, the dev overlay does not", name, k, v)
		}
	}

	for k, v := range s.Environment {
		switch {
		case strings.HasSuffix(k, "_ADDR") && k != "LISTEN_ADDR" && k != "METRICS_ADDR":
			hostport, ok := strings.CutPrefix(v, "dns:///")
			if !ok {
				t.Errorf("%s: %s=%q, want dns:///<service>:<port>", name, k, v)
				continue
			}
			host, port, _ := net.SplitHostPort(hostport)
			peer, ok := f.Services[host]
			if !ok || host != strings.ToLower(strings.TrimSuffix(k, "_ADDR")) {
				t.Errorf("%s: %s=%q names no service %s", name, k, v, strings.ToLower(strings.TrimSuffix(k, "_ADDR")))
				continue
			}
			if _, lp, _ := net.SplitHostPort(peer.Environment["LISTEN_ADDR"]); lp != port {
				t.Errorf("%s: %s=%q, but %s listens on port %s", name, k, v, host, lp)
			}
		case k == "NATS_URL" || k == "OTEL_EXPORTER_OTLP_ENDPOINT":
			rest := v[strings.Index(v, "://")+3:]
			host, _, _ := net.SplitHostPort(rest)
			if _, ok := f.Services[host]; !ok {
				t.Errorf("%s: %s=%q names no service", name, k, v)
			}
		}
	}
	for dep := range s.DependsOn {
		if _, ok := f.Services[dep]; !ok {
			t.Errorf("%s depends on %s, which is not a service", name, dep)
		}
	}
}

// TestComposeValidates has docker-compose itself check docker-compose.yml against the Compose
// specification (`docker-compose config`, which needs no Docker daemon). It skips when
// docker-compose is not installed, except in CI, whose .ci/run installs Debian's.
func TestComposeValidates(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("docker-compose is not installed: .ci/run installs Debian's docker-compose")
		}
		t.Skip("docker-compose is not installed (apt-get install docker-compose)")
	}
	cmd := exec.CommandContext(t.Context(), bin, "--file", filepath.Join(repoRoot, "docker-compose.yml"), "config", "--quiet")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("docker-compose config: %v\n%s", err, out)
	}
}
