package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCertsMakeAMeshThatServes (issue 12.3): `agentmesh certs` writes a mesh CA, a certificate
// per service, a clients CA with the CLI's certificate and the approval keys, and prints the
// configuration and the CLI's environment; `agentmesh dev` started with that configuration
// serves a run to the CLI with that environment, and refuses the CLI without its certificate.
func TestCertsMakeAMeshThatServes(t *testing.T) {
	isolate(t)
	dir := filepath.Join(t.TempDir(), "certs")
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := cli("certs", "--dir", dir, "--hosts", "agentmesh.example.com", "--user", "bob", "--tenant", "acme", "--role", "approver")
	if code != 0 {
		t.Fatalf("certs: exit %d\n%s", code, errOut)
	}
	for _, name := range []string{"ca.pem", "clients-ca.pem", "cli.pem", "grant.pub", "orchestrator.pem", "recovery.pem"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("certs wrote no %s: %v", name, err)
		}
	}
	for _, name := range []string{"ca-key.pem", "clients-ca-key.pem"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("certs kept a CA's private key, %s", name)
		}
	}
	for _, name := range []string{"action-key.pem", "cli-key.pem", "grant.key"} {
		if info, err := os.Stat(filepath.Join(dir, name)); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("private key %s: %v, %v; want mode 0600", name, info, err)
		}
	}
	if !strings.Contains(out, "acme/bob (approver)") || !strings.Contains(out, "TLS_CERT="+filepath.Join(dir, "memory.pem")) {
		t.Errorf("certs output:\n%s", out)
	}
	if code, _, errOut := cli("certs", "--dir", dir); code != 4 || !strings.Contains(errOut, "already holds") {
		t.Errorf("certs over an existing set: exit %d, %s; want 4, refused", code, errOut)
	}

	_, rest, _ := strings.Cut(out, "\napprovals:")
	snippet, _, _ := strings.Cut("approvals:"+rest, "\n\n")
	if err := os.WriteFile("agentmesh.yaml", []byte(snippet), 0o600); err != nil {
		t.Fatal(err)
	}
	env := regexp.MustCompile(`AGENTMESH_CA=(\S+) AGENTMESH_CERT=(\S+) AGENTMESH_KEY=(\S+)`).FindStringSubmatch(out)
	if env == nil {
		t.Fatalf("certs printed no environment for the CLI:\n%s", out)
	}
	t.Setenv(envCA, env[1])
	code, _, errOut = cli("dev", "--run", "What is 6 times 7?")
	if code != 4 || !strings.Contains(errOut, "authentication required") {
		t.Errorf("dev --run without the CLI's certificate: exit %d\n%s; want 4, UNAUTHENTICATED", code, errOut)
	}
	t.Setenv(envCert, env[2])
	t.Setenv(envKey, env[3])
	code, out, errOut = cli("dev", "--run", "What is 6 times 7?")
	if code != 0 || !strings.Contains(out, "42") || !strings.Contains(errOut, "← calculator: 42") {
		t.Errorf("dev --run with the printed configuration: exit %d\n%s%s", code, out, errOut)
	}
}
