package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/stagetest"
	"google.golang.org/grpc"
)

// conformanceCommand runs the conformance kit of a stage (pkg/stagetest) against an address and
// prints a table of its cases: PASS with what the case requires, or FAIL with how the stage broke
// it. --stage all runs every stage's kit, each at its configured address (services.* of --config,
// else $AGENTMESH_CONFIG, over the standard layers). Every case passing is
// exit 0, a failing case 1, an address where nothing answers 3, bad arguments 4. Stages behind
// mutual TLS are called as the service whose certificate TLS_CERT and TLS_KEY name (TLS_CA), and
// must have the mesh identity of the stage checked, or the caller's own (`agentmesh dev`), as
// the orchestrator requires of them; --peer IDENTITY accepts another instead (a stage of your
// own with its own certificate). A stage of another identity is exit 4, naming it, as any TLS
// handshake that fails on the CLI's credentials is. The orchestrator is called as any client
// of the public API (kitCredentials). --provider-addr, which adds the generation table's
// provider cases, is a bad argument for a stage other than generation.
func conformanceCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	stage := fs.String("stage", "", "the stage to check: "+strings.Join(stagetest.Stages(), ", ")+" (also called agent), or all (each at its configured address)")
	addr := fs.String("addr", "", "the stage's address HOST:PORT (default: the configured services.<stage>, e.g. 127.0.0.1:7002 for planning)")
	configPath := configFlag(fs)
	list := fs.Bool("list", false, "print the stage's cases and what each requires, without running them")
	providerAddr := fs.String("provider-addr", "", "HOST:PORT where the kit serves a scripted OpenAI-compatible provider (plain HTTP) to check how the generation stage classifies its failures; the stage's provider "+strconv.Quote(stagetest.ProviderName)+" must have the base URL http://HOST:PORT/v1")
	var peers []string
	fs.Func("peer", "the mesh identity a stage behind mutual TLS may have, spiffe://agentmesh/SERVICE or SERVICE, in the place of the stage's own (default: the stage's, e.g. spiffe://agentmesh/planning); repeat it for more than one",
		func(v string) error {
			service, ok := auth.ParseMeshID(v)
			if !ok {
				service, ok = auth.ParseMeshID(auth.MeshID(v))
			}
			if !ok {
				return fmt.Errorf("%q is not a mesh identity: want spiffe://%s/SERVICE or SERVICE, a service name of lower-case letters, digits and '-'", v, auth.MeshTrustDomain)
			}
			peers = append(peers, service)
			return nil
		})
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *stage == "" {
		return exitcode.Wrap(exitcode.Invalid, errors.New("conformance takes --stage STAGE and optionally --addr HOST:PORT, e.g. agentmesh conformance --stage planning --addr 127.0.0.1:7002"))
	}
	names := stagetest.Stages()
	if *stage != "all" {
		name, err := stagetest.Name(*stage)
		if err != nil {
			return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("conformance: %w", err))
		}
		names = []string{name}
	} else if *addr != "" {
		return exitcode.Wrap(exitcode.Invalid, errors.New("conformance: --stage all checks every stage at its configured address (services.* of the configuration); --addr names one stage's"))
	}
	if *providerAddr != "" && !slices.Contains(names, "generation") {
		// The provider cases are the generation table's: another stage's run would ignore it.
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("conformance: --provider-addr checks a "+
			"generation stage's provider failures; --stage %s has none (use --stage generation)", *stage))
	}
	if len(peers) > 0 && slices.Equal(names, []string{"orchestrator"}) {
		return exitcode.Wrap(exitcode.Invalid, errors.New("conformance: --peer names the mesh identity of a stage behind mutual TLS; "+
			"the orchestrator's public API is checked against AGENTMESH_CA by host name"))
	}
	if len(peers) > 0 && os.Getenv("TLS_CA") == "" {
		return exitcode.Wrap(exitcode.Invalid, errors.New("conformance: --peer names the mesh identity of a stage behind mutual TLS, "+
			"which the kit speaks with TLS_CA, TLS_CERT and TLS_KEY: set them"))
	}
	opts := stagetest.Options{ProviderAddr: *providerAddr}
	if *list {
		return listCases(names, opts, stdout)
	}
	var cfg *config.Config
	if *addr == "" {
		c, err := config.Load(*configPath)
		if err != nil {
			return exitcode.Wrap(exitcode.Invalid, err)
		}
		cfg = c
	}
	var failed, unreachable []string
	for i, name := range names {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		target := *addr
		if cfg != nil {
			target = stageAddr(cfg, name)
		}
		report, err := checkStage(ctx, name, target, peers, opts)
		switch {
		case errors.Is(err, stagetest.ErrUnreachable):
			fmt.Fprintf(stdout, "%s at %s: unreachable\n", name, target)
			unreachable = append(unreachable, fmt.Sprintf("%s at %s", name, target))
			continue
		case err != nil:
			return err
		}
		printReport(report, target, stdout)
		if !report.Passed() {
			failed = append(failed, fmt.Sprintf("%s (%d of %d cases)", name, report.Failed(), len(report.Results)))
		}
	}
	switch {
	case len(unreachable) > 0:
		return exitcode.Wrap(exitcode.Unavailable, fmt.Errorf("conformance: nothing answers for %s (is the stage running? set --addr)", strings.Join(unreachable, ", ")))
	case len(failed) > 0:
		return exitcode.Wrap(exitcode.Failed, fmt.Errorf("conformance: the stage breaks its contract: %s failed", strings.Join(failed, ", ")))
	}
	return nil
}

// checkStage runs the kit of stage name (as Stages names it) against addr, with opts; a stage
// behind mutual TLS must have the mesh identity of one of peers, else name's (kitCredentials).
func checkStage(ctx context.Context, name, addr string, peers []string, opts stagetest.Options) (stagetest.Report, error) {
	dialOpts, creds, err := kitCredentials(name, addr, peers)
	if err != nil {
		return stagetest.Report{}, err
	}
	conn, err := newClient(addr, dialOpts...)
	if err != nil {
		return stagetest.Report{}, err
	}
	defer func() { _ = conn.Close() }()
	report, err := stagetest.RunWith(ctx, name, conn, opts)
	if errors.Is(err, stagetest.ErrUnreachable) && creds != nil {
		if cause := creds.refused(ctx); cause != nil {
			return report, kitHandshakeError(name, addr, cause)
		}
	}
	if err != nil && !errors.Is(err, stagetest.ErrUnreachable) {
		err = exitcode.Wrap(exitcode.Invalid, err) // the kit's provider could not listen at --provider-addr
	}
	return report, err
}

// kitHandshakeError is the error, exit 4, of the kit of stage name whose TLS handshake with the
// server at addr refused the credentials, the server's or the kit's (cause).
func kitHandshakeError(name, addr string, cause error) error {
	hint := "check TLS_CA, the mesh CA, and TLS_CERT and TLS_KEY, the certificate of a service of the mesh"
	var other *auth.ServerCertError
	if errors.As(cause, &other) && other.Service != "" {
		hint = fmt.Sprintf("to check a %s stage that serves as %s, give --peer %s", name, auth.MeshID(other.Service), auth.MeshID(other.Service))
	}
	return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("conformance: the TLS handshake with the %s stage at %s failed: %v (%s)",
		name, addr, cause, hint))
}

// kitCredentials are the dial options of the kit of stage name at addr: the orchestrator is
// called as a client of the public API (AGENTMESH_CA, AGENTMESH_CERT and AGENTMESH_KEY,
// AGENTMESH_API_KEY), a stage as a mesh service (TLS_CA, TLS_CERT and TLS_KEY) that accepts a
// server of one of the mesh identities peers, else the stage's own (or the caller's own, as
// stageCredentials does). creds records the stage's handshakes (nil for the orchestrator).
func kitCredentials(name, addr string, peers []string) (opts []grpc.DialOption, creds *handshakes, err error) {
	if name == "orchestrator" {
		opts, err := dialCredentials(addr)
		return opts, nil, err
	}
	if len(peers) == 0 {
		peers = []string{name}
	}
	creds, err = stageCredentials(peers...)
	if err != nil {
		return nil, nil, err
	}
	return append(creds.dialOptions(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(dial.DefaultMaxMessageBytes))), creds, nil
}

// printReport prints a stage's results as a table.
func printReport(r stagetest.Report, addr string, w io.Writer) {
	fmt.Fprintf(w, "%s at %s\n", r.Stage, addr)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tRESULT\tREASON")
	for _, res := range r.Results {
		verdict := "PASS"
		if !res.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", res.Case, verdict, res.Reason)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d cases: %d passed, %d failed\n", len(r.Results), len(r.Results)-r.Failed(), r.Failed())
}

// listCases prints the cases of the stages and what each requires, with opts.
func listCases(names []string, opts stagetest.Options, w io.Writer) error {
	for i, name := range names {
		cases, err := stagetest.CasesWith(name, opts)
		if err != nil {
			return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("conformance: %w", err))
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, c := range cases {
			fmt.Fprintf(tw, "  %s\t%s\n", c.Case, c.Reason)
		}
		_ = tw.Flush()
	}
	return nil
}

// stageAddr is a stage's configured address.
func stageAddr(cfg *config.Config, name string) string {
	s := cfg.Services
	return map[string]string{
		"intent": s.Intent, "planning": s.Planning, "context": s.Context, "generation": s.Generation,
		"action": s.Action, "observation": s.Observation, "memory": s.Memory, "recovery": s.Recovery,
		"orchestrator": s.Orchestrator,
	}[name]
}
