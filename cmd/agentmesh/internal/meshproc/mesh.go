package meshproc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// DefaultReplicas are the orchestrator replicas of a mesh whose Options name none.
var DefaultReplicas = []string{"a", "b"}

// Options configure a Mesh.
type Options struct {
	// Config is written to the configuration file every process reads.
	Config Config
	// Replicas names the orchestrator replicas, each passed its name in AGENTMESH_REPLICA;
	// nil means DefaultReplicas.
	Replicas []string
	// MTLS runs the services with mutual TLS between them: Start makes a mesh CA and a
	// certificate per service (PKI), sets tls.ca in the configuration and each process's
	// TLS_CERT and TLS_KEY; the orchestrator replicas serve the public API over TLS with the
	// orchestrator's certificate. The harness's own connections (Service) trust the mesh CA and
	// present its certificate "meshproc", which names no mesh identity: a stage answers them
	// health only.
	MTLS bool
	// CRL, with MTLS, has Start write the mesh CA's CRL (PKI.Revoke), listing the
	// certificates of the services Revoked names, and set tls.crl to its file (PKI.CRLFile),
	// which every process follows: PKI.Revoke revokes others while the mesh runs.
	CRL bool
	// Revoked names the services whose certificates the CRL lists from the start, with CRL.
	Revoked []string
	// PKI is the mesh CA of a mesh with MTLS (NewPKI); nil makes a new one. Start issues into it
	// the certificates of the services it starts and of the harness: a stage in Replaced brings
	// its own.
	PKI *PKI
	// Env is added to every agentmesh process's environment, over the harness's own settings:
	// e.g. Jaeger.Env to export the spans (the harness exports none otherwise).
	Env []string
	// Replaced maps stage names ("planning", ...) to the addresses of stages that serve in their
	// place, e.g. an External one written in another language: Start does not start those
	// stages, and gives every process the replacement's address (PLANNING_ADDR, ...) instead.
	Replaced map[string]string
}

// Mesh is agentmesh as separate processes on loopback: a nats-server with JetStream, the eight
// stage services and the orchestrator replicas, wired only by the variables the binaries read
// (LISTEN_ADDR, NATS_URL, AGENTMESH_CONFIG, <STAGE>_ADDR, AGENTMESH_REPLICA; TLS_CERT and TLS_KEY
// with Options.MTLS).
type Mesh struct {
	nats     *NATS
	stages   map[string]*Service
	replicas []*Service
	js       jetstream.JetStream
	pki      *PKI // with Options.MTLS
}

// Start builds the binaries (once per test binary, see Build), writes the configuration, starts
// NATS, the stages and the replicas, and returns once every one of them is ready. Every process
// is killed when the test ends. Each process runs in an empty working directory with an empty
// HOME, so no configuration but the mesh's own is read.
func Start(t testing.TB, opts Options) *Mesh {
	t.Helper()
	bin := Build(t)
	root := t.TempDir()
	cfgDir, home, work := mkdir(t, root, "config"), mkdir(t, root, "home"), mkdir(t, root, "work")
	m := &Mesh{nats: newNATS(t, bin, work), stages: map[string]*Service{}}
	creds := insecure.NewCredentials()
	var tlsCfg config.TLS
	if opts.MTLS {
		services := []string{Orchestrator}
		for _, s := range Stages {
			if _, ok := opts.Replaced[s.Name]; !ok {
				services = append(services, s.Name)
			}
		}
		m.pki = opts.PKI
		if m.pki == nil {
			m.pki = NewPKI(t, mkdir(t, root, "certs"))
		}
		for _, s := range services {
			m.pki.Issue(t, s, certs.Service(s))
		}
		tlsCfg.CA = m.pki.CAFile()
		creds = m.pki.Client(t, m.pki.Issue(t, "meshproc", certs.Subject{CommonName: "meshproc", Client: true}))
		if opts.CRL {
			m.pki.Revoke(t, opts.Revoked...)
			tlsCfg.CRL = m.pki.CRLFile()
		}
		if opts.Config.ClientCA != "" {
			// auth.client_ca needs tls.cert in the file; each process's own overrides it.
			own := m.pki.Service(Orchestrator)
			tlsCfg.Cert, tlsCfg.Key = own.Cert, own.Key
		}
	}
	if (opts.CRL || len(opts.Revoked) > 0) && tlsCfg.CRL == "" {
		t.Fatal("meshproc: Options.CRL and Options.Revoked need Options.MTLS, and Revoked CRL")
	}
	cfgPath := opts.Config.write(t, cfgDir, tlsCfg)
	m.nats.Restart(t)

	env := append(os.Environ(),
		"HOME="+home,
		"NATS_URL="+m.nats.URL(),
		"AGENTMESH_CONFIG="+cfgPath,
		"OTEL_EXPORTER_OTLP_ENDPOINT=",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=",
		"OTEL_TRACES_EXPORTER=none",
	)
	env = append(env, opts.Env...)
	addrs := map[string]string{}
	for _, s := range Stages {
		addr, ok := opts.Replaced[s.Name]
		if !ok {
			addr = grpctest.FreeAddr(t)
		}
		addrs[s.Name] = addr
		env = append(env, s.AddrEnv+"="+addrs[s.Name])
	}
	started := slices.DeleteFunc(slices.Clone(Stages), func(s Stage) bool { _, ok := opts.Replaced[s.Name]; return ok })
	if len(started)+len(opts.Replaced) != len(Stages) {
		t.Fatalf("Options.Replaced names a stage that is not one of %v: %v", Stages, opts.Replaced)
	}
	for _, s := range started {
		p := newProcess(t, s.Name, filepath.Join(bin, s.Name), work, nil, slices.Concat(env, []string{"LISTEN_ADDR=" + addrs[s.Name]}, m.tlsEnv(s.Name)))
		m.stages[s.Name] = newService(t, p, addrs[s.Name], creds)
		p.Start(t)
	}
	for _, s := range started {
		m.stages[s.Name].WaitHealth(t, healthpb.HealthCheckResponse_SERVING)
	}

	replicas := opts.Replicas
	if replicas == nil {
		replicas = DefaultReplicas
	}
	for _, name := range replicas {
		addr := grpctest.FreeAddr(t)
		p := newProcess(t, name, filepath.Join(bin, Orchestrator), work, nil,
			slices.Concat(env, []string{"LISTEN_ADDR=" + addr, "AGENTMESH_REPLICA=" + name}, m.tlsEnv(Orchestrator)))
		r := newService(t, p, addr, creds)
		m.replicas = append(m.replicas, r)
		p.Start(t)
	}
	for _, r := range m.replicas {
		r.WaitHealth(t, healthpb.HealthCheckResponse_SERVING)
	}

	m.js = connect(t, m.nats.URL())
	return m
}

// tlsEnv is the environment that gives service its certificate, with Options.MTLS.
func (m *Mesh) tlsEnv(service string) []string {
	if m.pki == nil {
		return nil
	}
	pair := m.pki.Service(service)
	return []string{"TLS_CERT=" + pair.Cert, "TLS_KEY=" + pair.Key}
}

// PKI returns the mesh CA of a mesh started with Options.MTLS, nil without.
func (m *Mesh) PKI() *PKI { return m.pki }

// NATS returns the mesh's NATS server.
func (m *Mesh) NATS() *NATS { return m.nats }

// Stage returns the stage service of that name ("intent", "action", ...); it fails t for an
// unknown name.
func (m *Mesh) Stage(t testing.TB, name string) *Service {
	t.Helper()
	s, ok := m.stages[name]
	if !ok {
		t.Fatalf("no stage %q", name)
	}
	return s
}

// Replica returns the orchestrator replica of that name; it fails t for an unknown name.
func (m *Mesh) Replica(t testing.TB, name string) *Service {
	t.Helper()
	for _, r := range m.replicas {
		if r.name == name {
			return r
		}
	}
	t.Fatalf("no orchestrator replica %q", name)
	return nil
}

// JetStream returns the test's own JetStream client of the mesh's NATS; its connection
// reconnects, forever, after NATS restarts.
func (m *Mesh) JetStream() jetstream.JetStream { return m.js }

// connect opens the test's own connection to NATS, closed when the test ends.
func connect(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("meshproc"), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// mkdir makes the directory name under parent.
func mkdir(t testing.TB, parent, name string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}
