// Command agentmesh is the agentmesh CLI: `agentmesh dev` runs the whole mesh in one process,
// `agentmesh run` runs an agent through the public API, and further commands read, cancel and
// verify runs. Exit codes follow seed 000 and DESIGN §9: 0 success, 1 run failed or internal
// error, 3 a service could not start or be reached, 4 invalid arguments or configuration, 5 a
// final report that failed schema validation.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

const usage = `agentmesh — an LLM agent runtime as a gRPC mesh

usage:
  agentmesh dev [--config PATH] [--run MESSAGE] [--orchestrators N] [--data DIR] [--insecure]
                [--metrics-addr ADDR] [--metrics-web-config FILE] [-v]
                                                   run the whole mesh (embedded NATS) in one process;
                                                   with --run, make one run end to end and exit
  agentmesh run [--addr ADDR] [--json] [--schema FILE] [--profile NAME] [--user USER] [--max-turns N] MESSAGE
                                                   run an agent and stream its progress
  agentmesh tools [--addr ADDR]                   list the tools the mesh can execute
  agentmesh get [--addr ADDR] RUN_ID              print a finished run's result as JSON
  agentmesh watch [--addr ADDR] [--from SEQ] [--json] RUN_ID
                                                   follow a run's events
  agentmesh approve [--addr ADDR] [--reject [--end-run] | --modify JSON] [--feedback TEXT] RUN_ID CALL_ID
                                                   decide a tool call waiting for approval
  agentmesh answer [--addr ADDR] [--question ID] RUN_ID TEXT
                                                   answer the question a paused run asks
  agentmesh cancel [--addr ADDR] RUN_ID           cancel a live run
  agentmesh memories [--addr ADDR] [--user USER] [list | delete MEMORY_ID]
                                                   list your memories (the facts learned from
                                                   your runs), or delete one
  agentmesh transcript verify [--addr ADDR | --file RESULT.json] [RUN_ID]
                                                   check a run's hash-chained transcript
  agentmesh keys new --user USER [--tenant TENANT] [--role ROLE]...
                                                   make an API key and its auth.api_keys entry
  agentmesh certs --dir DIR [--hosts H1,H2] [--user USER] [--tenant TENANT] [--role ROLE]...
                                                   make a development mesh's CA and certificates
                                                   (mTLS between services, the CLI's client
                                                   certificate) and approval grant keys
  agentmesh conformance --stage STAGE [--addr HOST:PORT | --config PATH] [--provider-addr HOST:PORT] [--peer IDENTITY] [--list]
                                                   check that a stage or the orchestrator (e.g. a
                                                   replacement) keeps its contract: a PASS/FAIL table
                                                   of the conformance kit's cases; --stage all checks
                                                   all nine services; --provider-addr serves a
                                                   scripted provider there, to check how generation
                                                   classifies its provider's failures; with mTLS a
                                                   stage must have its own mesh identity, or one
                                                   --peer names
  agentmesh version                                print the build's version
  agentmesh ingest [--addr MEMORY_ADDR] [--config PATH] [--user USER] [--collection knowledge] DIR
                                                   store DIR's Markdown and text files for knowledge_search

PATH defaults to $AGENTMESH_CONFIG; ADDR to $AGENTMESH_ADDR, else 127.0.0.1:7000;
MEMORY_ADDR to $AGENTMESH_MEMORY_ADDR, else services.memory of --config, else of
$AGENTMESH_CONFIG (127.0.0.1:7007).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second Ctrl-C ends the process at once, while a run is cancelled
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitcode.Invalid
	}
	var err error
	switch args[0] {
	case "dev":
		err = devCommand(ctx, args[1:], stdout, stderr)
	case "run":
		err = runCommand(ctx, args[1:], stdout, stderr)
	case "tools":
		err = toolsCommand(ctx, args[1:], stdout)
	case "get":
		err = getCommand(ctx, args[1:], stdout, stderr)
	case "watch":
		err = watchCommand(ctx, args[1:], stdout, stderr)
	case "approve":
		err = approveCommand(ctx, args[1:], stdout)
	case "answer":
		err = answerCommand(ctx, args[1:], stdout)
	case "cancel":
		err = cancelCommand(ctx, args[1:], stdout)
	case "memories":
		err = memoriesCommand(ctx, args[1:], stdout)
	case "transcript":
		err = transcriptCommand(ctx, args[1:], stdout)
	case "ingest":
		err = ingestCommand(ctx, args[1:], stdout)
	case "keys":
		err = keysCommand(ctx, args[1:], stdout)
	case "certs":
		err = certsCommand(ctx, args[1:], stdout)
	case "conformance":
		err = conformanceCommand(ctx, args[1:], stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitcode.OK
	case "version", "--version":
		fmt.Fprintln(stdout, "agentmesh", version())
		return exitcode.OK
	default:
		err = exitcode.Wrap(exitcode.Invalid, fmt.Errorf("unknown command %q", args[0]))
	}
	var help helpRequested
	if errors.As(err, &help) {
		fmt.Fprint(stdout, help.text)
		return exitcode.OK
	}
	if err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintln(stderr, "agentmesh:", err)
		}
		return exitcode.Of(err)
	}
	return exitcode.OK
}

// version is the build's module version and VCS revision, as the Go toolchain recorded them.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value
		}
	}
	return v
}

// errReported marks a failure the command has already shown to the user; wrap it with
// exitcode.Wrap to choose the exit code.
var errReported = errors.New("already reported")
