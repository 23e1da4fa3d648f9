package deploy

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/generation"
	"github.com/agentmesh/agentmesh/services/intent"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/observation"
	"github.com/agentmesh/agentmesh/services/planning"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kustomizations are the kustomization directories, the base and each overlay, and whether
// its services start (the base's refuse: nothing authenticates their callers, see
// server.CheckExposure; its overlays say how they do).
var kustomizations = []struct {
	dir    string
	starts bool
}{{"k8s/base", false}, {"k8s/overlays/dev", true}, {"k8s/overlays/production", true}}

// healthExec is the exec probe of a service that serves TLS, which the kubelet's grpc probe
// cannot speak: the binary's health command (server.HealthCommand).
var healthExec = []string{"/usr/local/bin/service", server.HealthCommand}

// healthFollows names, per service whose gRPC health follows something it waits out rather than
// dies of, what that is: its readiness follows it, its startup and liveness (a tcpSocket probe
// of its grpc port) must not (TestLivesThroughANATSOutage). The memory stage's follows its
// PostgreSQL database, when it has one (memory.SQLStore.Serving).
var healthFollows = map[string]string{
	"orchestrator": "NATS", "action": "NATS", "memory": "PostgreSQL",
}

// drainsFirst names the services that wind work of their own down (server.Drainer) for up to
// their drain timeout before server.Main drains their calls for as long again: the
// orchestrator hands its runs off, the memory stage finishes its learning.
var drainsFirst = map[string]bool{"orchestrator": true, "memory": true}

// spanFlush is how long server.Main flushes spans after draining.
const spanFlush = server.FlushTimeout

// scalingMetrics are the Pods custom metrics each stage's autoscaler may scale on.
var scalingMetrics = map[string][]string{
	"action":     {"agentmesh_action_queue_depth"},
	"generation": {"agentmesh_generation_active_requests"},
}

// rendered is a kustomization's objects, decoded.
type rendered struct {
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret // those the kustomization generates
	hpas         map[string]*autoscalingv2.HorizontalPodAutoscaler
	claims       map[string]*corev1.PersistentVolumeClaim
	policies     map[string]*networkingv1.NetworkPolicy
	budgets      map[string]*policyv1.PodDisruptionBudget
}

// render builds the kustomization in dir with kustomize and strictly decodes every object into
// its Kubernetes API type: an unknown kind, an apiVersion of another type, or a field the type
// does not have fails the test.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := &rendered{
		deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{},
		services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{}, claims: map[string]*corev1.PersistentVolumeClaim{},
		policies: map[string]*networkingv1.NetworkPolicy{}, budgets: map[string]*policyv1.PodDisruptionBudget{},
	}
	for _, res := range m.Resources() {
		data, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		kind, name := res.GetKind(), res.GetName()
		var (
			into any
			tm   *metav1.TypeMeta
			want string
		)
		switch kind {
		case "Deployment":
			o := &appsv1.Deployment{}
			into, tm, want = o, &o.TypeMeta, "apps/v1"
			r.deployments[name] = o
		case "StatefulSet":
			o := &appsv1.StatefulSet{}
			into, tm, want = o, &o.TypeMeta, "apps/v1"
			r.statefulSets[name] = o
		case "Service":
			o := &corev1.Service{}
			into, tm, want = o, &o.TypeMeta, "v1"
			r.services[name] = o
		case "ConfigMap":
			o := &corev1.ConfigMap{}
			into, tm, want = o, &o.TypeMeta, "v1"
			r.configMaps[name] = o
		case "Secret":
			o := &corev1.Secret{}
			into, tm, want = o, &o.TypeMeta, "v1"
			r.secrets[name] = o
		case "PersistentVolumeClaim":
			o := &corev1.PersistentVolumeClaim{}
			into, tm, want = o, &o.TypeMeta, "v1"
			r.claims[name] = o
		case "HorizontalPodAutoscaler":
			o := &autoscalingv2.HorizontalPodAutoscaler{}
			into, tm, want = o, &o.TypeMeta, "autoscaling/v2"
			r.hpas[name] = o
		case "Namespace":
			o := &corev1.Namespace{}
			into, tm, want = o, &o.TypeMeta, "v1"
		case "NetworkPolicy":
			o := &networkingv1.NetworkPolicy{}
			into, tm, want = o, &o.TypeMeta, "networking.k8s.io/v1"
			r.policies[name] = o
		case "PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			into, tm, want = o, &o.TypeMeta, "policy/v1"
			r.budgets[name] = o
		default:
			t.Errorf("%s: %s %s is of a kind this test does not know: add its type", dir, kind, name)
			continue
		}
		if err := yaml.UnmarshalStrict(data, into); err != nil {
			t.Errorf("%s: %s %s does not decode strictly: %v", dir, kind, name, err)
			continue
		}
		if tm.APIVersion != want {
			t.Errorf("%s: %s %s has apiVersion %q, want %q", dir, kind, name, tm.APIVersion, want)
		}
	}
	return r
}

// TestKustomizationsMatchTheBinaries (issue 14.3) renders the base and each overlay and checks
// every service's Deployment against its binary and the rest of the objects.
func TestKustomizationsMatchTheBinaries(t *testing.T) {
	for _, k := range kustomizations {
		t.Run(filepath.Base(k.dir), func(t *testing.T) {
			r := render(t, k.dir)
			for _, name := range meshServices {
				d := r.deployments[name]
				if d == nil {
					t.Errorf("no Deployment %s", name)
					continue
				}
				t.Run(name, func(t *testing.T) { checkDeployment(t, r, d, k.starts) })
			}
			for name, h := range r.hpas {
				checkHPA(t, r, name, h)
			}
			for _, name := range meshServices {
				if r.hpas[name] == nil {
					t.Errorf("no HorizontalPodAutoscaler %s", name)
				}
				if s := r.services[name]; s == nil || s.Spec.ClusterIP != corev1.ClusterIPNone {
					t.Errorf("no headless Service %s (clusterIP: None), which dns:/// targets balance over", name)
				}
			}
			if s := r.statefulSets["nats"]; s == nil || len(s.Spec.VolumeClaimTemplates) == 0 || !slices.Contains(s.Spec.Template.Spec.Containers[0].Args, "--jetstream") {
				t.Error("no StatefulSet nats running JetStream on a persistent volume")
			}
		})
	}
}

// TestDevImagesAreTheLoadedOnes: the dev overlay runs the images built as the README says
// (docker build -t agentmesh/<service>, untagged) and loaded into the cluster (kind,
// minikube), so the kubelet must take them from the node: an untagged image's pull policy
// defaults to Always, which asks a registry for agentmesh/<service> and fails.
func TestDevImagesAreTheLoadedOnes(t *testing.T) {
	r := render(t, "k8s/overlays/dev")
	for _, name := range meshServices {
		d := r.deployments[name]
		if d == nil {
			t.Errorf("no Deployment %s", name)
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.ImagePullPolicy != corev1.PullIfNotPresent && c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("%s: image %s with imagePullPolicy %q, want IfNotPresent (the image is loaded, not pulled)", name, c.Image, c.ImagePullPolicy)
		}
	}
}

// checkDeployment checks a service's Deployment: its environment against its binary, its ports
// and probes against LISTEN_ADDR and METRICS_ADDR, the addresses it dials against the
// Services, its configuration layers by loading them, and its termination grace; when starts,
// that the binary would start with this configuration and environment, and the kubelet could
// probe it.
func checkDeployment(t *testing.T, r *rendered, d *appsv1.Deployment, starts bool) {
	t.Helper()
	name, pod := d.Name, d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Errorf("%s: %d containers, want 1", name, len(pod.Containers))
		return
	}
	c := pod.Containers[0]
	env := map[string]string{}
	var names []string
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("%s sets %s twice", name, e.Name)
		}
		env[e.Name], names = e.Value, append(names, e.Name)
	}
	root, refs := mountConfig(t, r, name, pod, c)
	checkEnvRead(t, "Deployment "+name, name, names, refs)
	cfg := checkConfigLoads(t, name, root, env)

	port := addrPort(t, name, "LISTEN_ADDR", env["LISTEN_ADDR"])
	if p := containerPort(c, "grpc"); p != port {
		t.Errorf("%s: containerPort grpc is %d, LISTEN_ADDR listens on %d", name, p, port)
	}
	for kind, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		switch {
		case p == nil:
			t.Errorf("%s has no %s probe", name, kind)
		case probeHandlers(p) != 1:
			t.Errorf("%s: the %s probe has %d handlers, which the API server refuses: want one of grpc, tcpSocket, exec", name, kind, probeHandlers(p))
		case kind != "readiness" && healthFollows[name] != "" && (p.TCPSocket == nil || p.TCPSocket.Port.String() != "grpc"):
			t.Errorf("%s: the %s probe is not a tcpSocket probe of the grpc port: its health follows %s, which the kubelet would restart it for", name, kind, healthFollows[name])
		case p.TCPSocket != nil && (kind == "readiness" || p.TCPSocket.Port.String() != "grpc"):
			t.Errorf("%s: the %s probe is a tcpSocket probe of %s, want the grpc port, and only for startup and liveness", name, kind, p.TCPSocket.Port.String())
		case p.TCPSocket != nil:
		case p.GRPC != nil && p.GRPC.Port != port:
			t.Errorf("%s: the %s probe asks port %d, LISTEN_ADDR listens on %d", name, kind, p.GRPC.Port, port)
		case p.GRPC == nil && (p.Exec == nil || !slices.Equal(p.Exec.Command, healthExec)):
			t.Errorf("%s: the %s probe is neither grpc on LISTEN_ADDR nor %v", name, kind, healthExec)
		case p.GRPC != nil && cfg != nil && cfg.TLS.CA != "":
			t.Errorf("%s: the %s probe is the kubelet's grpc probe, which presents no client certificate to a mutual TLS server: use %v", name, kind, healthExec)
		}
	}
	if cfg != nil && cfg.Memory.Store == config.StoreSQLite && name == "memory" {
		h := r.hpas[name]
		if d.Spec.Replicas != nil && *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || h == nil || h.Spec.MaxReplicas != 1 {
			t.Errorf("memory keeps its store in a SQLite file (%s), which one process writes: want one replica, strategy Recreate and maxReplicas 1", cfg.Memory.Path)
		}
	}
	if starts && cfg != nil {
		t.Setenv("AGENTMESH_INSECURE", env["AGENTMESH_INSECURE"])
		authenticated := cfg.TLS.CA != "" || name == "orchestrator" && cfg.Auth.Enabled()
		if err := server.CheckExposure(env["LISTEN_ADDR"], authenticated, server.Insecure()); err != nil {
			t.Errorf("%s would not start: %v", name, err)
		}
	}
	if m := env["METRICS_ADDR"]; m != "" {
		mp := addrPort(t, name, "METRICS_ADDR", m)
		if p := containerPort(c, "metrics"); p != mp {
			t.Errorf("%s: containerPort metrics is %d, METRICS_ADDR listens on %d", name, p, mp)
		}
		if a := d.Spec.Template.Annotations["prometheus.io/port"]; a != strconv.Itoa(int(mp)) {
			t.Errorf("%s: annotation prometheus.io/port is %q, METRICS_ADDR listens on %d", name, a, mp)
		}
	} else {
		t.Errorf("%s sets no METRICS_ADDR", name)
	}

	for k, v := range env {
		switch {
		case strings.HasSuffix(k, "_ADDR") && k != "LISTEN_ADDR" && k != "METRICS_ADDR":
			u, err := url.Parse(v)
			if err != nil || u.Scheme != "dns" || u.Host != "" {
				t.Errorf("%s: %s=%q, want dns:///<service>:<port>", name, k, v)
				continue
			}
			stage := strings.ToLower(strings.TrimSuffix(k, "_ADDR"))
			checkTarget(t, r, name, k, strings.TrimPrefix(u.Path, "/"), stage)
		case k == "NATS_URL":
			checkTarget(t, r, name, k, strings.TrimPrefix(v, "nats://"), "nats")
		case k == "OTEL_EXPORTER_OTLP_ENDPOINT":
			checkTarget(t, r, name, k, strings.TrimPrefix(v, "http://"), "jaeger")
		}
	}

	drain := drainTimeout(t, name, cfg, env)
	grace := drain + spanFlush
	if drainsFirst[name] {
		grace += drain // it hands its runs off, or finishes its learning, first
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= grace {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want more than the %v the binary may take to stop", name, g, grace)
	}
	if d.Spec.Replicas != nil {
		t.Errorf("%s sets replicas, which its HorizontalPodAutoscaler owns: each apply would reset them", name)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("%s: the pod does not run as a numeric non-root user", name)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: no cpu request or memory limit", name)
	}
}

// drainTimeout is how long the binary name, with the configuration cfg (nil when it did not
// load) and the environment env, lets its calls in flight finish after SIGTERM, as server.Main
// decides: DRAIN_TIMEOUT_MS, else the stage's own (action.DrainTimeout,
// generation.DrainTimeout; intent.DrainTimeout, planning.DrainTimeout, observation.DrainTimeout
// and memory.DrainTimeout with a model),
// else server.DefaultDrainTimeout.
func drainTimeout(t *testing.T, name string, cfg *config.Config, env map[string]string) time.Duration {
	t.Helper()
	if v, ok := env["DRAIN_TIMEOUT_MS"]; ok {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 1 {
			t.Errorf("%s: DRAIN_TIMEOUT_MS=%q is not a positive number of milliseconds", name, v)
		}
		return time.Duration(ms) * time.Millisecond
	}
	if cfg == nil {
		cfg = config.Default()
	}
	switch name {
	case "action":
		return action.DrainTimeout(cfg)
	case "generation":
		return generation.DrainTimeout(cfg)
	case "intent":
		if d, ok := intent.DrainTimeout(cfg); ok {
			return d
		}
	case "planning":
		if d, ok := planning.DrainTimeout(cfg); ok {
			return d
		}
	case "observation":
		if d, ok := observation.DrainTimeout(cfg); ok {
			return d
		}
	case "memory":
		if d, ok := memory.DrainTimeout(cfg); ok {
			return d
		}
	}
	return server.DefaultDrainTimeout
}

// checkTarget checks that the address hostport that the Deployment from dials in variable k is
// a Service named like the workload want, with that port, leading to a port of the workload's
// pods.
func checkTarget(t *testing.T, r *rendered, from, k, hostport, want string) {
	t.Helper()
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Errorf("%s: %s=%q: %v", from, k, hostport, err)
		return
	}
	if host != want {
		t.Errorf("%s: %s names the Service %q, want %q", from, k, host, want)
	}
	s := r.services[host]
	if s == nil {
		t.Errorf("%s: %s names the Service %q, which does not exist", from, k, host)
		return
	}
	port, _ := strconv.Atoi(p)
	for _, sp := range s.Spec.Ports {
		if int(sp.Port) != port {
			continue
		}
		var pod *corev1.PodTemplateSpec
		if d := r.deployments[host]; d != nil {
			pod = &d.Spec.Template
		} else if ss := r.statefulSets[host]; ss != nil {
			pod = &ss.Spec.Template
		}
		if pod == nil {
			t.Errorf("%s: %s: the Service %s leads to no workload of that name", from, k, host)
			return
		}
		for lk, lv := range s.Spec.Selector {
			if pod.Labels[lk] != lv {
				t.Errorf("%s: %s: the Service %s does not select the pods of %s", from, k, host, host)
			}
		}
		c := pod.Spec.Containers[0]
		target := containerPort(c, sp.TargetPort.String()) // the Services name their target ports
		if target == 0 {
			t.Errorf("%s: %s: the Service %s's port %d leads to %q, which %s's container does not name", from, k, host, port, sp.TargetPort.String(), host)
		}
		if listen := envValue(c, "LISTEN_ADDR"); listen != "" && addrPort(t, host, "LISTEN_ADDR", listen) != target {
			t.Errorf("%s: %s: port %d of the Service %s does not reach %s's LISTEN_ADDR %s", from, k, port, host, host, listen)
		}
		return
	}
	t.Errorf("%s: %s: the Service %s has no port %d", from, k, host, port)
}

// checkHPA checks that an autoscaler scales an existing Deployment, within sane bounds, on
// CPU and the custom metrics its stage publishes.
func checkHPA(t *testing.T, r *rendered, name string, h *autoscalingv2.HorizontalPodAutoscaler) {
	t.Helper()
	ref := h.Spec.ScaleTargetRef
	if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || r.deployments[ref.Name] == nil {
		t.Errorf("HorizontalPodAutoscaler %s targets %s %s %s, which is not a Deployment here", name, ref.APIVersion, ref.Kind, ref.Name)
	}
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || *h.Spec.MinReplicas > h.Spec.MaxReplicas {
		t.Errorf("HorizontalPodAutoscaler %s: minReplicas %v, maxReplicas %d", name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
	}
	cpu := false
	var custom []string
	for _, m := range h.Spec.Metrics {
		switch m.Type {
		case autoscalingv2.ResourceMetricSourceType:
			cpu = cpu || m.Resource.Name == corev1.ResourceCPU
		case autoscalingv2.PodsMetricSourceType:
			custom = append(custom, m.Pods.Metric.Name)
		default:
			t.Errorf("HorizontalPodAutoscaler %s scales on a %s metric", name, m.Type)
		}
	}
	if !cpu {
		t.Errorf("HorizontalPodAutoscaler %s does not scale on CPU", name)
	}
	if !slices.Equal(custom, scalingMetrics[ref.Name]) {
		t.Errorf("HorizontalPodAutoscaler %s scales on the custom metrics %v, want %v", name, custom, scalingMetrics[ref.Name])
	}
}

// mountConfig writes the ConfigMaps and the Secrets the kustomization generates (and, for each
// other Secret projected as a .env file beside a configuration layer, a .env defining the
// variables the layer refers to) that the container mounts under a temporary root, as the pod
// sees them. It returns the root and the variables the layers refer to.
func mountConfig(t *testing.T, r *rendered, name string, pod corev1.PodSpec, c corev1.Container) (string, map[string]bool) {
	t.Helper()
	root, refs := t.TempDir(), map[string]bool{}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Errorf("%s mounts the volume %s, which the pod does not have", name, m.Name)
			continue
		}
		var maps []string
		dotEnv := false
		switch {
		case v.ConfigMap != nil:
			maps = append(maps, v.ConfigMap.Name)
		case v.Secret != nil:
			if s := r.secrets[v.Secret.SecretName]; s != nil {
				for file, data := range s.Data {
					writeFile(t, filepath.Join(root, m.MountPath, file), string(data))
					for ref := range configRefs(string(data)) {
						refs[ref] = true
					}
				}
			}
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					maps = append(maps, s.ConfigMap.Name)
				}
				if s.Secret != nil {
					dotEnv = dotEnv || slices.ContainsFunc(s.Secret.Items, func(k corev1.KeyToPath) bool { return k.Path == ".env" })
				}
			}
		}
		dir := filepath.Join(root, m.MountPath)
		var layerRefs []string
		for _, cm := range maps {
			data := r.configMaps[cm]
			if data == nil {
				t.Errorf("%s mounts the ConfigMap %s, which does not exist", name, cm)
				continue
			}
			for file, text := range data.Data {
				writeFile(t, filepath.Join(dir, file), text)
				for ref := range configRefs(text) {
					refs[ref] = true
					layerRefs = append(layerRefs, ref)
				}
			}
		}
		if dotEnv {
			var b strings.Builder
			for _, ref := range layerRefs {
				fmt.Fprintf(&b, "%s=from-the-secret\n", ref)
			}
			writeFile(t, filepath.Join(dir, ".env"), b.String())
		}
	}
	return root, refs
}

// checkConfigLoads loads the configuration the binary would, from its mounted files under root:
// AGENTMESH_CONFIG over the system layer /etc/agentmesh/agentmesh.yaml, expanding variables
// from the container's environment and the .env files; the load must succeed. It returns the
// configuration, nil when it does not load.
func checkConfigLoads(t *testing.T, name, root string, env map[string]string) *config.Config {
	t.Helper()
	explicit := env["AGENTMESH_CONFIG"]
	if explicit == "" {
		t.Errorf("%s sets no AGENTMESH_CONFIG", name)
		return nil
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	layers := []config.Layer{
		{Name: "explicit", Path: filepath.Join(root, explicit), Required: true},
		{Name: "system", Path: filepath.Join(root, "/etc/agentmesh", config.FileName)},
	}
	cfg, err := config.LoadLayers(layers)
	if err != nil {
		t.Errorf("%s: its configuration does not load: %v", name, err)
	}
	return cfg
}

// writeFile writes text to file, making its directory.
func writeFile(t *testing.T, file, text string) {
	t.Helper()
	if err := os.MkdirAll(path.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// addrPort returns the port of the listen address of variable k.
func addrPort(t *testing.T, name, k, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(p)
	if err != nil || perr != nil {
		t.Errorf("%s: %s=%q is not a listen address", name, k, addr)
	}
	return int32(n)
}

// probeHandlers is the number of handlers (exec, httpGet, tcpSocket, grpc) p has: a valid probe
// has one, and a patch that adds one must null the base's.
func probeHandlers(p *corev1.Probe) int {
	n := 0
	for _, set := range []bool{p.Exec != nil, p.HTTPGet != nil, p.TCPSocket != nil, p.GRPC != nil} {
		if set {
			n++
		}
	}
	return n
}

// containerPort is the number of the container's port called name, 0 when it has none.
func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// envValue is the value the container gives the variable k, "" when it sets none.
func envValue(c corev1.Container, k string) string {
	for _, e := range c.Env {
		if e.Name == k {
			return e.Value
		}
	}
	return ""
}
