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

// TestCertsRefuseAHostThatNoCertificateMatches: a --hosts entry that is neither a host name nor
// an IP address (a URL, a host with its port) is refused, exit 4, naming it, and no file is
// written. It was put in every service's certificate as a DNS name no address ever matches, so
// TLS failed later with "certificate is valid for …" far from the mistake.
func TestCertsRefuseAHostThatNoCertificateMatches(t *testing.T) {
	isolate(t)
	for _, host := range []string{"https://mesh.example.com", "mesh.example.com:7000", "mesh example", "-mesh.example.com", "mesh..example.com"} {
		t.Run(host, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "certs")
			_, errOut := runCLI(t, 4, "certs", "--dir", dir, "--hosts", "ok.example.com,"+host)
			if want := `certs: --hosts: "` + host + `" is not a host name or an IP address`; !strings.Contains(errOut, want) {
				t.Errorf("the error does not name the host (%s):\n%s", want, errOut)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("certs wrote %d file(s) before refusing the host", len(entries))
			}
		})
	}
	for _, hosts := range []string{"mesh.example.com,10.0.0.7,::1", "*.mesh.example.com,orchestrator_1"} {
		runCLI(t, 0, "certs", "--dir", filepath.Join(t.TempDir(), "certs"), "--hosts", hosts)
	}
}

// TestCLIWithAnotherCAExits4: a CLI whose AGENTMESH_CA did not sign the orchestrator's
// certificate fails its TLS handshake, which gRPC reports UNAVAILABLE: the CLI exited 3 and
// asked whether `agentmesh dev` was running, while it was, and the fault was AGENTMESH_CA.
func TestCLIWithAnotherCAExits4(t *testing.T) {
	isolate(t)
	mesh, other := filepath.Join(t.TempDir(), "mesh"), filepath.Join(t.TempDir(), "other")
	out, _ := runCLI(t, 0, "certs", "--dir", mesh)
	runCLI(t, 0, "certs", "--dir", other)
	_, rest, _ := strings.Cut(out, "\napprovals:")
	snippet, _, _ := strings.Cut("approvals:"+rest, "\n\n")
	if err := os.WriteFile("agentmesh.yaml", []byte(snippet), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envCA, filepath.Join(other, "ca.pem"))
	t.Setenv(envCert, filepath.Join(mesh, "cli.pem"))
	t.Setenv(envKey, filepath.Join(mesh, "cli-key.pem"))
	_, errOut := runCLI(t, 4, "dev", "--run", "What is 6 times 7?")
	if !strings.Contains(errOut, envCA) || strings.Contains(errOut, "is `agentmesh dev` running") {
		t.Errorf("the error does not name %s:\n%s", envCA, errOut)
	}
}

// TestCertsWriteNoKeyThroughALink: `agentmesh certs` writes no file through a symbolic link
// that --dir holds in the place of one of its files, dangling or not: it exits 4 naming the
// file, and the link's target is not created. A directory others can write to (a shared /tmp)
// could hold a link grant.key to a file of theirs, and the approval grant's private key, the
// one file written by replacing what was there, went there (`certs` otherwise refuses to
// replace a file, and creates each new).
func TestCertsWriteNoKeyThroughALink(t *testing.T) {
	isolate(t)
	for _, name := range []string{"grant.key", "grant.pub", "ca.pem", "action-key.pem"} {
		dir, elsewhere := t.TempDir(), filepath.Join(t.TempDir(), "taken")
		if err := os.Symlink(elsewhere, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), []string{"certs", "--dir", dir}, &stdout, &stderr)
		if code != 4 || !strings.Contains(stderr.String(), name) {
			t.Errorf("certs with a link %s: exit %d, %s; want 4 naming it", name, code, stderr.String())
		}
		if _, err := os.Lstat(elsewhere); err == nil {
			t.Errorf("certs wrote %s through the link, to its target", name)
		}
	}
}
