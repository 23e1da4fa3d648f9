package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/grant"
)

// TestDevApprovesTools: a tool that requires approval runs only with a grant the orchestrator
// signs (approvals.signing_key) and the action stage verifies (approvals.verify_key). The dev
// overlay and docker-compose.yml, which a developer applies as they are, ship a development key
// pair, each half mounted in its own service only: a grant the orchestrator signs with what it
// mounts verifies on action with what action mounts. Without the pair, an approved call is
// refused however a person answers. The private key says it is for development only.
func TestDevApprovesTools(t *testing.T) {
	dev := render(t, "k8s/overlays/dev")
	compose := readCompose(t)
	for _, setup := range []struct {
		name  string
		mount func(t *testing.T, service string) (root string, env map[string]string)
	}{
		{"k8s/overlays/dev", func(t *testing.T, service string) (string, map[string]string) {
			_, _, env, root := mountDeployment(t, dev, service)
			return root, env
		}},
		{"docker-compose.yml", func(t *testing.T, service string) (string, map[string]string) {
			s := compose.Services[service]
			root := t.TempDir()
			for _, v := range s.Volumes {
				src, dst, _ := strings.Cut(v, ":")
				dst, _, _ = strings.Cut(dst, ":")
				if !strings.HasPrefix(src, "./") {
					continue
				}
				text, err := os.ReadFile(filepath.Join(repoRoot, src))
				if err != nil {
					t.Fatalf("%s mounts %s: %v", service, src, err)
				}
				writeFile(t, filepath.Join(root, dst), string(text))
			}
			return root, s.Environment
		}},
	} {
		t.Run(setup.name, func(t *testing.T) {
			var (
				signer   *grant.Signer
				verifier *grant.Verifier
			)
			for _, service := range []string{"orchestrator", "action"} {
				root, env := setup.mount(t, service)
				cfg := checkConfigLoads(t, service, root, env)
				if cfg == nil {
					return
				}
				switch service {
				case "orchestrator":
					if cfg.Approvals.SigningKey == "" {
						t.Fatalf("orchestrator: no approvals.signing_key: no tool that requires approval can run")
					}
					file := filepath.Join(root, cfg.Approvals.SigningKey)
					text, err := os.ReadFile(file)
					if err != nil {
						t.Fatalf("orchestrator: approvals.signing_key %s is not mounted: %v", cfg.Approvals.SigningKey, err)
					}
					if !strings.Contains(string(text), "NOT FOR PRODUCTION") {
						t.Errorf("orchestrator: the development key %s does not say it is not for production", cfg.Approvals.SigningKey)
					}
					if signer, err = grant.LoadSigner(file); err != nil {
						t.Fatalf("orchestrator: approvals.signing_key: %v", err)
					}
				case "action":
					if cfg.Approvals.VerifyKey == "" {
						t.Fatalf("action: no approvals.verify_key: no tool that requires approval can run")
					}
					if cfg.Approvals.SigningKey != "" {
						if _, err := os.Stat(filepath.Join(root, cfg.Approvals.SigningKey)); err == nil {
							t.Errorf("action mounts the private key %s: only the orchestrator signs grants", cfg.Approvals.SigningKey)
						}
					}
					var err error
					if verifier, err = grant.LoadVerifier(filepath.Join(root, cfg.Approvals.VerifyKey)); err != nil {
						t.Fatalf("action: approvals.verify_key: %v", err)
					}
				}
			}
			now := time.Now()
			g, err := signer.Sign(grant.Call{RunID: "run", CallID: "call", Tool: "delete_file"}, now.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if err := verifier.Verify(g, grant.Call{RunID: "run", CallID: "call", Tool: "delete_file"}, now); err != nil {
				t.Errorf("a grant the orchestrator signed does not verify on action: %v", err)
			}
		})
	}
}
