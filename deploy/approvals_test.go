package deploy

import (
	"os"
	"path"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/grant"
	corev1 "k8s.io/api/core/v1"
)

// TestProductionApprovesTools: a tool that requires approval runs only with a grant the
// orchestrator signed (approvals.signing_key) and the action stage verifies (approvals
// .verify_key); without the pair, no such tool can ever run, however a person answers. The
// memory stage verifies the orchestrator's assertions of the user a stage acts for with the
// same public key: without it, a stolen certificate of the action stage reads every user's
// memories. The production overlay configures them, each a file of the pod's own Secret
// agentmesh-tls-<service> (the orchestrator's the private key, action's and memory's the
// public one, as agentmesh certs writes them, grant.key and grant.pub); a pair written there
// signs a grant the action stage verifies and an assertion the memory stage verifies.
func TestProductionApprovesTools(t *testing.T) {
	r := render(t, "k8s/overlays/production")
	keys := map[string]string{} // the key file each pod reads, under root
	for name, field := range map[string]string{
		"orchestrator": "signing_key", "action": "verify_key", "memory": "verify_key",
	} {
		pod, c, env, root := mountDeployment(t, r, name)
		cfg := checkConfigLoads(t, name, root, env)
		if cfg == nil {
			continue
		}
		file := cfg.Approvals.SigningKey
		if field == "verify_key" {
			file = cfg.Approvals.VerifyKey
		}
		if file == "" {
			t.Errorf("%s: no approvals.%s", name, field)
			continue
		}
		if secret := mountedSecret(pod, c, file); secret != "agentmesh-tls-"+name {
			t.Errorf("%s: approvals.%s is %s, which is not in its Secret agentmesh-tls-%s (mounted from %q)", name, field, file, name, secret)
			continue
		}
		keys[name] = path.Join(root, file)
	}
	if t.Failed() {
		return
	}
	pub, priv := grant.GenerateKey()
	for _, file := range keys {
		if err := os.MkdirAll(path.Dir(file), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := grant.WriteKeys(keys["orchestrator"], keys["action"], pub, priv); err != nil {
		t.Fatal(err)
	}
	pubPEM, err := os.ReadFile(keys["action"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keys["memory"], pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	signer, err := grant.LoadSigner(keys["orchestrator"])
	if err != nil {
		t.Fatalf("the orchestrator's approvals.signing_key: %v", err)
	}
	verifier, err := grant.LoadVerifier(keys["action"])
	if err != nil {
		t.Fatalf("action's approvals.verify_key: %v", err)
	}
	now := time.Now()
	g, err := signer.Sign(grant.Call{RunID: "run", CallID: "call", Tool: "delete_file"}, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier.Verify(g, grant.Call{RunID: "run", CallID: "call", Tool: "delete_file"}, now); err != nil {
		t.Errorf("a grant the orchestrator signed does not verify on action: %v", err)
	}
	memory, err := grant.LoadVerifier(keys["memory"])
	if err != nil {
		t.Fatalf("memory's approvals.verify_key: %v", err)
	}
	assertion := signer.SignUser("acme/alice", now.Add(time.Minute))
	if err := memory.VerifyUser(assertion, "acme/alice", now); err != nil {
		t.Errorf("a user assertion the orchestrator signed does not verify on memory: %v", err)
	}
}

// mountDeployment is the Deployment name of r as its pod sees it: the pod, its first
// container, that container's variables and the root under which mountConfig wrote what the
// container mounts.
func mountDeployment(t *testing.T, r *rendered, name string) (pod corev1.PodSpec, c corev1.Container, env map[string]string, root string) {
	t.Helper()
	d := r.deployments[name]
	if d == nil {
		t.Fatalf("no Deployment %s", name)
	}
	pod = d.Spec.Template.Spec
	c = pod.Containers[0]
	env = map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	root, _ = mountConfig(t, r, name, pod, c)
	return pod, c, env, root
}

// mountedSecret returns the name of the Secret whose volume container c mounts at the
// directory holding file, "" when none does.
func mountedSecret(pod corev1.PodSpec, c corev1.Container, file string) string {
	for _, m := range c.VolumeMounts {
		if path.Dir(file) != path.Clean(m.MountPath) || m.SubPath != "" {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
	}
	return ""
}
