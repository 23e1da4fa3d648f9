package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"gopkg.in/yaml.v3"
)

// meshServices are the services `agentmesh certs` makes a certificate for, the orchestrator first.
var meshServices = []string{
	mesh.Orchestrator, mesh.Intent, mesh.Planning, mesh.Context, mesh.Generation,
	mesh.Action, mesh.Observation, mesh.Memory, mesh.Recovery,
}

// The files `agentmesh certs` writes besides the services' certificates (<service>.pem and
// <service>-key.pem).
const (
	meshCAFile    = "ca.pem"         // the mesh CA: services trust it, and the CLI trusts the orchestrator by it
	clientsCAFile = "clients-ca.pem" // the CA of the public API's client certificates (auth.client_ca)
	cliName       = "cli"            // cli.pem and cli-key.pem: the CLI's client certificate
	grantKeyFile  = "grant.key"      // approvals.signing_key
	grantPubFile  = "grant.pub"      // approvals.verify_key
)

// certsCommand makes the certificates of a development mesh: `agentmesh certs --dir DIR
// [--hosts h1,h2] [--user U] [--tenant T] [--role R]...` writes a mesh CA and one certificate
// per service naming its mesh identity, a CA of the public API's clients and a client
// certificate for the CLI, and the approval grant key pair, then prints the configuration and
// the environment that use them. It replaces no file: a directory that holds any of them is
// refused.
func certsCommand(_ context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory the files are written to, created if missing (required)")
	hosts := fs.String("hosts", "", "more host names and IP addresses of every service's certificate, comma-separated")
	user := fs.String("user", "cli", "the user of the CLI's client certificate")
	tenant := fs.String("tenant", "", "the tenant of the CLI's client certificate")
	var roles roleList
	fs.Var(&roles, "role", "a role of the CLI's client certificate: "+strings.Join(auth.Roles, ", ")+" (repeatable)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || fs.NArg() != 0 {
		return exitcode.Wrap(exitcode.Invalid, errors.New("usage: agentmesh certs --dir DIR [--hosts H1,H2] [--user USER] [--tenant TENANT] [--role ROLE (repeatable)]"))
	}
	if *user == "" || strings.Contains(*user, "/") || strings.Contains(*tenant, "/") ||
		auth.HasControl(*user) || auth.HasControl(*tenant) {
		return exitcode.Wrap(exitcode.Invalid, errors.New("certs: --user must be set, and neither "+
			"--user nor --tenant may contain '/' or a control character"))
	}
	extra, err := splitHosts(*hosts)
	if err != nil {
		return exitcode.Wrap(exitcode.Invalid, err)
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return exitcode.Wrap(exitcode.Invalid, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("certs: %w", err))
	}
	if err := refuseExisting(abs); err != nil {
		return exitcode.Wrap(exitcode.Invalid, err)
	}
	set, err := writeDevCerts(abs, extra, auth.Principal{Tenant: *tenant, User: *user, Roles: roles})
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return set.print(stdout)
}

// devCerts are the files of a development mesh.
type devCerts struct {
	dir       string
	cfg       config.Config // tls, auth.client_ca and approvals
	services  map[string]certs.Pair
	cli       certs.Pair
	principal auth.Principal
}

// writeDevCerts writes the files of a development mesh into dir.
func writeDevCerts(dir string, hosts []string, cli auth.Principal) (*devCerts, error) {
	meshCA, err := certs.NewCA("agentmesh mesh CA")
	if err != nil {
		return nil, err
	}
	clientsCA, err := certs.NewCA("agentmesh clients CA")
	if err != nil {
		return nil, err
	}
	set := &devCerts{dir: dir, services: map[string]certs.Pair{}, principal: cli}
	set.cfg.TLS.CA, set.cfg.Auth.ClientCA = filepath.Join(dir, meshCAFile), filepath.Join(dir, clientsCAFile)
	if err := meshCA.WriteCert(set.cfg.TLS.CA); err != nil {
		return nil, err
	}
	if err := clientsCA.WriteCert(set.cfg.Auth.ClientCA); err != nil {
		return nil, err
	}
	for _, s := range meshServices {
		if set.services[s], err = meshCA.Write(dir, s, certs.Service(s, hosts...)); err != nil {
			return nil, err
		}
	}
	set.cfg.TLS.Cert, set.cfg.TLS.Key = set.services[mesh.Orchestrator].Cert, set.services[mesh.Orchestrator].Key
	set.cli, err = clientsCA.Write(dir, cliName, certs.Subject{
		CommonName: cli.User, Organization: cli.Tenant, OrganizationalUnits: cli.Roles, Client: true,
	})
	if err != nil {
		return nil, err
	}
	set.cfg.Approvals = config.Approvals{SigningKey: filepath.Join(dir, grantKeyFile), VerifyKey: filepath.Join(dir, grantPubFile)}
	pub, priv := grant.GenerateKey()
	if err := grant.WriteKeys(set.cfg.Approvals.SigningKey, set.cfg.Approvals.VerifyKey, pub, priv); err != nil {
		return nil, err
	}
	return set, nil
}

// print tells what was written, the configuration that uses it and each process's environment.
func (d *devCerts) print(w io.Writer) error {
	fmt.Fprintf(w, "Wrote a development mesh's certificates (valid %d days) to %s:\n", int(certs.Validity.Hours()/24), d.dir)
	fmt.Fprintf(w, "  %-33s the mesh CA: services trust it, the CLI trusts the orchestrator by it\n", meshCAFile)
	fmt.Fprintf(w, "  %-33s one per service, naming its mesh identity %s\n", "<service>.pem, <service>-key.pem", auth.MeshID("<service>"))
	fmt.Fprintf(w, "  %-33s the CA of the public API's client certificates\n", clientsCAFile)
	fmt.Fprintf(w, "  %-33s the CLI's client certificate, for %s\n", cliName+".pem, "+cliName+"-key.pem", describePrincipal(d.principal))
	fmt.Fprintf(w, "  %-33s the approval grant key pair\n", grantKeyFile+", "+grantPubFile)
	fmt.Fprintln(w, "The CAs' private keys are not kept: run again for a new set.")
	fmt.Fprintln(w, "\nagentmesh.yaml (tls.cert is the orchestrator's; `agentmesh dev` uses it for all its services):")
	fmt.Fprintln(w)
	snippet := map[string]any{
		"tls":       d.cfg.TLS,
		"auth":      map[string]string{"client_ca": d.cfg.Auth.ClientCA},
		"approvals": d.cfg.Approvals,
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(snippet); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nEach service binary runs with its own certificate:")
	fmt.Fprintln(w)
	for _, s := range meshServices {
		fmt.Fprintf(w, "  %-13s TLS_CERT=%s TLS_KEY=%s\n", s, d.services[s].Cert, d.services[s].Key)
	}
	fmt.Fprintln(w, "\nThe CLI:")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %s=%s %s=%s %s=%s\n", envCA, d.cfg.TLS.CA, envCert, d.cli.Cert, envKey, d.cli.Key)
	return nil
}

// describePrincipal names the principal of a client certificate: its id and its roles.
func describePrincipal(p auth.Principal) string {
	if len(p.Roles) == 0 {
		return p.ID()
	}
	return p.ID() + " (" + strings.Join(p.Roles, ", ") + ")"
}

// refuseExisting fails when dir already holds a file `agentmesh certs` would write, or a
// symbolic link in its place (dangling or not), which it would write through.
func refuseExisting(dir string) error {
	names := []string{meshCAFile, clientsCAFile, cliName + ".pem", cliName + "-key.pem", grantKeyFile, grantPubFile}
	for _, s := range meshServices {
		names = append(names, s+".pem", s+"-key.pem")
	}
	for _, n := range names {
		switch _, err := os.Lstat(filepath.Join(dir, n)); {
		case err == nil:
			return fmt.Errorf("certs: %s already holds %s; remove the old set or pick another --dir", dir, n)
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("certs: %w", err)
		}
	}
	return nil
}

// splitHosts splits the comma-separated list of --hosts, dropping empty names. An entry that is
// neither an IP address nor a host name (a URL, a host with its port) is refused: a
// certificate naming it matches no address.
func splitHosts(list string) ([]string, error) {
	var hosts []string
	for h := range strings.SplitSeq(list, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if net.ParseIP(h) == nil && !hostName(h) {
			return nil, fmt.Errorf("certs: --hosts: %q is not a host name or an IP address (name each without a scheme or a port, e.g. mesh.example.com,10.0.0.7)", h)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// hostName reports whether h is a DNS name a certificate can hold for TLS to match: dot-separated
// labels of 1 to 63 letters, digits, '-' (not first or last) and '_' (which crypto/x509 accepts
// outside the Web PKI), at most 253 bytes, the first label possibly the wildcard '*'.
func hostName(h string) bool {
	if len(h) > 253 {
		return false
	}
	for i, label := range strings.Split(h, ".") {
		if i == 0 && label == "*" && h != "*" {
			continue
		}
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' ||
			strings.ContainsFunc(label, func(r rune) bool {
				return r != '-' && r != '_' && !('0' <= r && r <= '9') && !('a' <= r && r <= 'z') && !('A' <= r && r <= 'Z')
			}) {
			return false
		}
	}
	return true
}
