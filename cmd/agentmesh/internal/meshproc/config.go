package meshproc

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"gopkg.in/yaml.v3"
)

// LeaseTTL is how long the heartbeat of a replica of a Mesh lives without a beat
// (durability.lease_ttl_ms): short, so that a replica takes over the runs of a killed one
// within seconds.
const LeaseTTL = 2 * time.Second

// scriptedProvider and scriptedModel are the provider and model of the only target: the LLM
// that Config.LLM points at.
const (
	scriptedProvider = "scripted"
	scriptedModel    = "scripted-model"
)

// Config is what a Mesh writes to the configuration file (AGENTMESH_CONFIG) all its processes
// read, besides the lease (LeaseTTL); everything else keeps the defaults of pkg/config.
type Config struct {
	// LLM is the base URL of an OpenAI-compatible API, e.g. llmtest.Server.URL(): the provider
	// "scripted", whose model "scripted-model" is the only target. Empty keeps the built-in
	// rules model.
	LLM string
	// RestTools are REST tools by name (rest_tools), e.g. ToolServer.Tool.
	RestTools map[string]config.RestTool
	// RequireApproval lists tools that always wait for approval (tools.require_approval);
	// the other RestTools never do (tools.no_approval), whatever their method.
	RequireApproval []string
	// Idempotent lists tools that run again when a crash interrupted them (tools.idempotent).
	Idempotent []string
	// StageModels names, by stage (intent, planning, observation, memory, fallback), the
	// model of the "scripted" provider that stage asks (models.<stage>); it needs LLM.
	StageModels map[string]string
	// Embeddings names the model of the "scripted" provider the memory stage embeds with
	// (memory.embeddings); it needs LLM. Empty leaves semantic search off.
	Embeddings string
	// ClientCA is auth.client_ca: the public API authenticates the client certificates of the
	// CA of that file (it needs Options.MTLS, whose certificate the replicas serve it with).
	ClientCA string
	// ClientCRL is auth.client_crl, the CRLs of ClientCA.
	ClientCRL string
	// ClientRoles is auth.client_roles, the roles the certificates of ClientCA grant: "ou"
	// (empty: the default) or "none".
	ClientRoles string
	// ClientOURoles is auth.client_ou_roles, the roles the OUs it maps grant.
	ClientOURoles map[string]string
	// APIKeysFile is auth.api_keys_file: the public API takes the API keys of that file, and
	// follows it. Empty leaves the public API open.
	APIKeysFile string
}

// noApproval lists the REST tools that RequireApproval does not: a ToolServer's tools are
// POSTs, which wait for approval unless the configuration exempts them, and a test asks for
// approval by naming the tool.
func (c Config) noApproval() []string {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(c.RestTools)) {
		if !slices.Contains(c.RequireApproval, name) {
			names = append(names, name)
		}
	}
	return names
}

// write writes the configuration file into dir, with a new key pair of approval grants beside
// it and the tls section tls (when it sets ca), checks that it loads, and returns its path.
func (c Config) write(t testing.TB, dir string, tls config.TLS) string {
	t.Helper()
	approvals := config.Approvals{SigningKey: filepath.Join(dir, "grant.key"), VerifyKey: filepath.Join(dir, "grant.pub")}
	pub, priv := grant.GenerateKey()
	if err := grant.WriteKeys(approvals.SigningKey, approvals.VerifyKey, pub, priv); err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{
		"durability": map[string]any{"lease_ttl_ms": LeaseTTL.Milliseconds()},
		"tools":      config.Tools{RequireApproval: c.RequireApproval, NoApproval: c.noApproval(), Idempotent: c.Idempotent},
		"approvals":  approvals,
	}
	if c.LLM != "" {
		doc["providers"] = map[string]config.Provider{scriptedProvider: {Type: config.ProviderOpenAI, BaseURL: c.LLM, APIKey: "meshproc-key"}}
		doc["targets"] = []config.Target{{Provider: scriptedProvider, Model: scriptedModel}}
	}
	if len(c.StageModels) > 0 {
		models := map[string]config.Target{}
		for stage, model := range c.StageModels {
			models[stage] = config.Target{Provider: scriptedProvider, Model: model}
		}
		doc["models"] = models
	}
	if c.Embeddings != "" {
		doc["memory"] = map[string]any{
			"embeddings": config.Target{Provider: scriptedProvider, Model: c.Embeddings}}
	}
	if len(c.RestTools) > 0 {
		doc["rest_tools"] = c.RestTools
	}
	if tls.CA != "" {
		doc["tls"] = tls
	}
	if auth := (config.Auth{ClientCA: c.ClientCA, ClientCRL: c.ClientCRL, ClientRoles: c.ClientRoles,
		ClientOURoles: c.ClientOURoles, APIKeysFile: c.APIKeysFile}); !reflect.ValueOf(auth).IsZero() {
		doc["auth"] = auth
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, config.FileName)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.LoadLayers([]config.Layer{{Name: "explicit", Path: path, Required: true}}); err != nil {
		t.Fatalf("the mesh's configuration does not load: %v\n%s", err, data)
	}
	return path
}
