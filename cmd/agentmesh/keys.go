package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"gopkg.in/yaml.v3"
)

// keysCommand makes API keys: `agentmesh keys new --user U [--tenant T] [--role R]...` prints a
// new key, which is shown once and never stored, and the auth.api_keys entry that holds its
// hash.
func keysCommand(_ context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && isHelpFlag(args[0]) {
		args = []string{"new", args[0]}
	}
	if len(args) == 0 || args[0] != "new" {
		return exitcode.Wrap(exitcode.Invalid, errors.New("usage: agentmesh keys new --user USER [--tenant TENANT] [--role ROLE], repeating --role for several"))
	}
	fs := flag.NewFlagSet("keys new", flag.ContinueOnError)
	user := fs.String("user", "", "the user the key authenticates (required)")
	tenant := fs.String("tenant", "", "the user's tenant")
	var roles roleList
	fs.Var(&roles, "role", "a role of the key's principal: "+strings.Join(auth.Roles, ", ")+" (repeatable)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("keys new takes no arguments besides its flags (got %q); repeat --role for several roles", fs.Args()))
	}
	key, hash := auth.NewKey()
	entry := map[string]any{"hash": hash, "user": *user}
	if *tenant != "" {
		entry["tenant"] = *tenant
	}
	if len(roles) > 0 {
		entry["roles"] = []string(roles)
	}
	// auth.New checks the entry exactly as the services will.
	p := auth.Principal{Tenant: *tenant, User: *user, Roles: roles}
	if _, err := auth.New([]auth.Key{{Hash: hash, Principal: p}}, nil); err != nil {
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("keys new: %w", err))
	}
	fmt.Fprintf(stdout, "API key for %s (shown once; callers send it as \"authorization: Bearer <key>\" or AGENTMESH_API_KEY):\n\n  %s\n\nAdd its hash to agentmesh.yaml:\n\n", p.ID(), key)
	enc := yaml.NewEncoder(stdout)
	enc.SetIndent(2)
	if err := enc.Encode(map[string]any{"auth": map[string]any{"api_keys": []any{entry}}}); err != nil {
		return err
	}
	return enc.Close()
}

// roleList is a repeatable --role flag.
type roleList []string

func (r *roleList) String() string { return strings.Join(*r, ",") }

func (r *roleList) Set(v string) error {
	if !slices.Contains(auth.Roles, v) {
		return fmt.Errorf("unknown role %q (want one of %s)", v, strings.Join(auth.Roles, ", "))
	}
	*r = append(*r, v)
	return nil
}
