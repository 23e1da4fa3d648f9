package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// envAddr names the variable that gives the orchestrator's address when --addr does not.
const envAddr = "AGENTMESH_ADDR"

// defaultAddr is where the CLI finds the orchestrator.
func defaultAddr() string {
	if a := os.Getenv(envAddr); a != "" {
		return a
	}
	return "127.0.0.1:7000"
}

// connect dials the orchestrator's public API.
func connect(addr string) (agentv1.AgentServiceClient, func(), error) {
	creds, err := dialCredentials(addr)
	if err != nil {
		return nil, nil, err
	}
	conn, err := newClient(addr, creds...)
	if err != nil {
		return nil, nil, err
	}
	return agentv1.NewAgentServiceClient(conn), func() { _ = conn.Close() }, nil
}

// newClient makes the client of every command that calls a service at addr. An addr that is not
// host:port with a port from 0 to 65535 (config.CheckAddress, as services.* must be) is an
// invalid argument, exit 4, before anything is dialled: gRPC took it for a name to resolve, and
// the command exited 3, as if nothing answered at a good address. The error names
// $AGENTMESH_ADDR when addr is its value.
func newClient(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if err := config.CheckAddress(addr); err != nil {
		if addr == os.Getenv(envAddr) {
			err = fmt.Errorf("$%s: %w", envAddr, err)
		}
		return nil, exitcode.Wrap(exitcode.Invalid, err)
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("address %q: %w", addr, err))
	}
	return conn, nil
}

// rpcError maps an RPC failure to the CLI's exit codes. A run, call, question or memory the
// command names and the mesh does not know (NOT_FOUND), or one the caller's credentials do not
// permit (PERMISSION_DENIED: another user's memories), is an invalid argument, exit 4 (seed
// 000), not a run that failed.
func rpcError(addr string, err error) error {
	if err := handshakeError(addr, err); err != nil {
		return err
	}
	switch status.Code(err) {
	case codes.Unavailable:
		return exitcode.Wrap(exitcode.Unavailable, fmt.Errorf("cannot reach the orchestrator at %s (is `agentmesh dev` running?): %v", addr, status.Convert(err).Message()))
	case codes.InvalidArgument, codes.NotFound, codes.PermissionDenied:
		return exitcode.Wrap(exitcode.Invalid, errors.New(status.Convert(err).Message()))
	case codes.Unauthenticated:
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("%s (set %s, or %s and %s)", status.Convert(err).Message(), envAPIKey, envCert, envKey))
	}
	return exitcode.Wrap(exitcode.Failed, errors.New(status.Convert(err).Message()))
}

// inputError is rpcError for a decision (approve) or an answer (answer): FAILED_PRECONDITION
// (the call was decided already, the question answered already, the run is ending) says that
// the run waits for no such input, an invalid argument, exit 4 (seed 000), not a run that
// failed.
func inputError(addr string, err error) error {
	if status.Code(err) == codes.FailedPrecondition {
		return exitcode.Wrap(exitcode.Invalid, errors.New(status.Convert(err).Message()))
	}
	return rpcError(addr, err)
}

// configFlag defines the --config flag of a command that takes service addresses from the
// configuration: the file named, else $AGENTMESH_CONFIG (what every service reads), over the
// standard layers (config.Load).
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", os.Getenv("AGENTMESH_CONFIG"), "the configuration whose services.* addresses are the defaults (default $AGENTMESH_CONFIG, else the standard layers)")
}

// parseFlags parses a command's flags wherever they stand among its arguments, as the README
// writes them (agentmesh answer RUN_ID TEXT --question ID): the flag package stops at the
// first argument that is not a flag, and took every flag after it for an argument. fs.Args()
// is then the arguments without the flags; after "--" everything is an argument (an answer
// that starts with '-').
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				var b strings.Builder
				fmt.Fprintf(&b, "usage of agentmesh %s:\n", fs.Name())
				fs.SetOutput(&b)
				fs.PrintDefaults()
				return helpRequested{text: b.String()}
			}
			return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("%s: %w", fs.Name(), err))
		}
		rest := fs.Args()
		terminated := len(args) > len(rest) && args[len(args)-len(rest)-1] == "--"
		if len(rest) == 0 || terminated {
			positional = append(positional, rest...)
			break
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...)) // fs.Args() is positional
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// helpRequested is a command's -h or --help: its flags are printed on stdout, exit 0.
type helpRequested struct{ text string }

func (h helpRequested) Error() string { return "help requested" }

// isHelpFlag reports whether arg asks for help as flag.Parse understands it (-h, --h, -help,
// --help): a command made of one subcommand (keys new, transcript verify) answers it with the
// subcommand's flags.
func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "--h" || arg == "-help" || arg == "--help"
}

// runCommand streams one run and prints its answer; the exit code follows the outcome.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	addr := fs.String("addr", defaultAddr(), "orchestrator address")
	asJSON := fs.Bool("json", false, "print the whole RunResult as JSON instead of the answer")
	user := fs.String("user", "", `user id (default: the authenticated principal's, or "cli" without credentials)`)
	maxTurns := fs.Int("max-turns", 0, "override max_turns (at least 1)")
	schema := fs.String("schema", "", "a JSON schema file: the answer must be JSON matching it (output_format json)")
	profile := fs.String("profile", "", "the agent profile (agentmesh.yaml profiles) whose prompts and targets the run uses")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return exitcode.Wrap(exitcode.Invalid, errors.New(`run takes one message, e.g. agentmesh run "What is 6 times 7?"`))
	}
	if *user == "" && !authenticated() {
		*user = "cli"
	}
	req := &agentv1.RunRequest{Message: fs.Arg(0), UserId: *user, Profile: *profile}
	if flagSet(fs, "max-turns") {
		if *maxTurns < 1 || *maxTurns > math.MaxInt32 {
			return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("--max-turns: must be between 1 and %d, got %d", math.MaxInt32, *maxTurns))
		}
		n := int32(*maxTurns)
		req.Overrides = &agentv1.RunOverrides{MaxTurns: &n}
	}
	if *schema != "" {
		s, err := readSchema(*schema)
		if err != nil {
			return err
		}
		req.OutputFormat, req.OutputSchema = typev1.OutputFormat_OUTPUT_FORMAT_JSON, s
	}
	client, closeConn, err := connect(*addr)
	if err != nil {
		return err
	}
	defer closeConn()
	return streamRun(ctx, client, *addr, req, *asJSON, stdout, stderr)
}

// readSchema reads the JSON schema of run --schema.
func readSchema(path string) (*structpb.Struct, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("--schema: %w", err))
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("--schema: %s is not a JSON object: %w", path, err))
	}
	return s, nil
}

// streamRun runs req through StreamRun, rendering progress on stderr and the answer on stdout.
// The CLI names the run (RunRequest.run_id) unless req does, so that it can cancel the run
// when it is interrupted before any of the run's events reached it. A run that moves to another
// orchestrator replica is followed on there (runEvents).
func streamRun(ctx context.Context, client agentv1.AgentServiceClient, addr string, req *agentv1.RunRequest, asJSON bool, stdout, stderr io.Writer) error {
	if req.GetRunId() == "" {
		req.RunId = uuid.NewString()
	}
	p := &progress{w: stderr}
	stream, err := client.StreamRun(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return cancelInterrupted(client, addr, req.GetRunId(), 0, asJSON, p, stdout)
		}
		return rpcError(addr, err)
	}
	var result *typev1.RunResult
	events := &runEvents{client: client, runID: req.GetRunId(), stream: stream, p: p}
	for {
		ev, err := events.next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return cancelInterrupted(client, addr, req.GetRunId(), events.seq, asJSON, p, stdout)
			}
			p.endLine()
			if lost := lostStartError(req.GetRunId(), err); lost != nil {
				return lost // followed on past events no longer kept
			}
			return followOn(req.GetRunId(), events.seq, rpcError(addr, err))
		}
		p.event(ev)
		if f := ev.GetRunFinished(); f != nil {
			result = f.GetResult()
		}
		a, q := ev.GetApprovalRequested(), ev.GetInputRequested()
		if a == nil && q == nil {
			continue
		}
		if asJSON { // the paused snapshot, as JSON like any other result
			paused, err := client.GetRun(ctx, &agentv1.GetRunRequest{RunId: ev.GetRunId()})
			if err != nil {
				return rpcError(addr, err)
			}
			return printJSON(paused, stdout) // a pause is not a failure (exit 0)
		}
		for _, c := range a.GetPendingAction().GetToolCalls() {
			if c.GetId() == orchestrator.PlanCallID { // the pseudo call that stands for the plan
				fmt.Fprintf(stdout, "run %s is waiting for approval of its plan: agentmesh approve %s %s\n",
					ev.GetRunId(), ev.GetRunId(), c.GetId())
				continue
			}
			// The call's id and name are the model's: shown, never obeyed by the terminal.
			hint := fmt.Sprintf("run %s is waiting for approval of call %s (%s): agentmesh approve %s %s",
				ev.GetRunId(), c.GetId(), c.GetName(), ev.GetRunId(), c.GetId())
			fmt.Fprintln(stdout, printable(hint))
		}
		if q != nil { // the question named, so that a late answer never answers a later one
			ask := fmt.Sprintf("run %s asks: %s\nanswer with: agentmesh answer --question %s %s YOUR ANSWER",
				ev.GetRunId(), q.GetQuestion().GetQuestion(), q.GetQuestion().GetId(), ev.GetRunId())
			fmt.Fprintln(stdout, printable(ask))
		}
		return nil
	}
	if result == nil {
		return exitcode.Wrap(exitcode.Failed, errors.New("the run stream ended without run_finished"))
	}
	return printResult(result, asJSON, stdout)
}

// followOn is err, the failure of a stream that followed run runID, with how to follow the
// run on from seq, the last event shown: the mesh runs the run apart from whoever follows it,
// so a broken connection loses the stream, not the run. With seq 0 (no event shown), err.
func followOn(runID string, seq uint64, err error) error {
	if seq == 0 {
		return err
	}
	return fmt.Errorf("%w\nrun %s is not lost: follow it with: agentmesh watch %s --from %d", err, runID, runID, seq)
}

// Re-attaching to a run that moved: the first retry waits reattachBackoff, each next one twice
// as long up to reattachMaxBackoff.
const (
	reattachBackoff    = 100 * time.Millisecond
	reattachMaxBackoff = 2 * time.Second
)

// reattachLimit is how long after its stream failed the CLI tries to follow a run on (a
// variable for the tests of a connection that stays broken).
var reattachLimit = 30 * time.Second

// runEvents are the events of one run, from a StreamRun or WatchRun stream, followed on when
// the run moves: an orchestrator replica that drains (SIGTERM during a deploy) hands its runs
// to another one and fails their streams UNAVAILABLE, and a connection to it that breaks is
// UNAVAILABLE too. Once an event arrived (the run exists), such a failure re-attaches with
// WatchRun after seq through the same client, whose address a load balancer routes to a live
// replica: the run request is never sent again, and no event is given twice or skipped. The
// progress says so when it begins. A StreamRun that fell behind (RESOURCE_EXHAUSTED: the CLI
// read it too slowly, its terminal stalled) is followed on with WatchRun at once.
type runEvents struct {
	client   agentv1.AgentServiceClient
	runID    string
	stream   grpc.ServerStreamingClient[eventv1.RunEvent]
	seq      uint64    // the last event given (WatchRun's from_seq)
	received bool      // an event arrived
	behind   uint64    // seq when a stream last fell behind (RESOURCE_EXHAUSTED), plus one
	p        *progress // says that the run is followed on, so that a pause is not a hang
}

// next returns the run's next event; io.EOF after its stream's last one. A stream that fails
// UNAVAILABLE after an event arrived is re-attached, retried with a doubling backoff for up to
// reattachLimit; the failure is then the last stream's. One that fails RESOURCE_EXHAUSTED
// after an event arrived is re-attached at once, once per event. Once ctx ends it returns
// ctx's error.
func (e *runEvents) next(ctx context.Context) (*eventv1.RunEvent, error) {
	var giveUp time.Time
	backoff := reattachBackoff
	for {
		ev, err := e.stream.Recv()
		switch {
		case err == nil && ev.GetSeq() <= e.seq: // given already (seq is 1, 2, 3 ... per run)
			continue
		case err == nil:
			e.seq, e.received = ev.GetSeq(), true
			return ev, nil
		case status.Code(err) == codes.ResourceExhausted && e.received && ctx.Err() == nil &&
			e.behind != e.seq+1:
			// Read too slowly (a terminal that stalled): the stream held what it could, and
			// the run goes on; follow it on at once, once per event shown (an event over
			// the message limit fails every stream alike).
			e.behind = e.seq + 1
			e.p.line("  ! the stream fell behind; following run %s on from event %d",
				e.runID, e.seq)
			stream, werr := e.client.WatchRun(ctx,
				&agentv1.WatchRunRequest{RunId: e.runID, FromSeq: e.seq})
			if werr != nil {
				return nil, werr
			}
			e.stream = stream
			continue
		case status.Code(err) != codes.Unavailable || !e.received || ctx.Err() != nil:
			return nil, err
		case giveUp.IsZero():
			giveUp = time.Now().Add(reattachLimit)
			e.p.line("  ! the stream broke (%s); following run %s on from event %d", status.Convert(err).Message(), e.runID, e.seq)
		case time.Now().After(giveUp):
			return nil, err
		}
		for {
			if err := sleep(ctx, backoff); err != nil {
				return nil, err
			}
			backoff = min(2*backoff, reattachMaxBackoff)
			stream, err := e.client.WatchRun(ctx, &agentv1.WatchRunRequest{RunId: e.runID, FromSeq: e.seq})
			if err == nil {
				e.stream = stream
				break
			}
			// No replica took the call yet (the address answers nothing while the
			// deploy goes on): try again until the limit.
			if status.Code(err) != codes.Unavailable || time.Now().After(giveUp) {
				return nil, err
			}
		}
	}
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// interruptTimeout bounds how long an interrupted CLI waits for the run it followed to end.
const interruptTimeout = 30 * time.Second

// unstartedWait is how long an interrupted CLI that received none of its run's events looks
// for the run before it takes it as never started: the orchestrator may have been starting
// it as the request was cut off.
const unstartedWait = 2 * time.Second

// cancelInterrupted cancels the run an interrupted CLI (Ctrl-C, SIGTERM) was following, or
// had asked for (seq 0: none of its events arrived): the mesh runs it apart from its caller,
// and it would otherwise go on unseen, calling the model and running tools. It follows the
// run's events after seq to its end and shows it as it shows a run that ended by itself (exit
// 1 for OUTCOME_INTERRUPTED; a run that ended before the cancellation reached it keeps its
// outcome and exit code). A run that cannot be found, when no event arrived, never started:
// exit 1; after its events began, it ended by itself (and its result is no longer kept where
// CancelRun looks): its events show how, and it exits with its own exit code.
func cancelInterrupted(client agentv1.AgentServiceClient, addr, runID string, seq uint64, asJSON bool, p *progress, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), interruptTimeout)
	defer cancel()
	p.line("! interrupted: cancelling run %s", runID)
	req := &agentv1.CancelRunRequest{RunId: runID, Reason: "interrupted in the CLI"}
	_, err := client.CancelRun(ctx, req)
	for giveUp := time.Now().Add(unstartedWait); seq == 0 && status.Code(err) == codes.NotFound; _, err = client.CancelRun(ctx, req) {
		if time.Now().After(giveUp) {
			return exitcode.Wrap(exitcode.Failed, fmt.Errorf("interrupted before run %s started (should it start after all: agentmesh cancel %s)", runID, runID))
		}
		time.Sleep(50 * time.Millisecond)
	}
	switch {
	case status.Code(err) == codes.NotFound: // seq > 0: the run ended by itself meanwhile
		p.line("! run %s has ended already; showing its end", runID)
	case err != nil:
		return fmt.Errorf("run %s may still be running (agentmesh cancel %s): %w", runID, runID, rpcError(addr, err))
	}
	stream, err := client.WatchRun(ctx, &agentv1.WatchRunRequest{RunId: runID, FromSeq: seq})
	if err != nil {
		return rpcError(addr, err)
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return exitcode.Wrap(exitcode.Failed, fmt.Errorf("the events of run %s ended without run_finished", runID))
		}
		if err != nil {
			return rpcError(addr, err)
		}
		p.event(ev)
		if f := ev.GetRunFinished(); f != nil {
			return printResult(f.GetResult(), asJSON, stdout)
		}
	}
}

// printJSON prints a result as multi-line protojson, its terminal controls escaped
// (jsonPrintable).
func printJSON(result *typev1.RunResult, stdout io.Writer) error {
	b, err := protojson.MarshalOptions{Multiline: true}.Marshal(result)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(jsonPrintable(b)))
	return nil
}

func printResult(result *typev1.RunResult, asJSON bool, stdout io.Writer) error {
	if asJSON {
		if err := printJSON(result, stdout); err != nil {
			return err
		}
	} else if c := result.GetFinalReport().GetContent(); c != "" {
		fmt.Fprintln(stdout, printable(c)) // --json gives the answer as it is
	}
	return endedExit(result)
}

// endedExit is how a command that showed result exits: nil for a run that succeeded, is
// paused or has not ended, else errReported with the exit code of the run's failure
// (runExitCode), the same for run, get and watch (seed 000: a CLI that exits 0 for a run that
// failed breaks the contract).
func endedExit(result *typev1.RunResult) error {
	switch result.GetOutcome() {
	case typev1.Outcome_OUTCOME_UNSPECIFIED, typev1.Outcome_OUTCOME_AWAITING_APPROVAL,
		typev1.Outcome_OUTCOME_AWAITING_INPUT:
		return nil
	}
	if result.GetSuccess() {
		return nil
	}
	return exitcode.Wrap(runExitCode(result.GetExitReason()), errReported)
}

// runExitCode is the exit code of a run that failed with exit reason exit, by seed 000's
// categories: 3 a stage could not be reached, 4 a contract no run can use (configuration or
// arguments), 5 a final report that failed output_schema validation, else 1.
func runExitCode(exit string) int {
	switch exit {
	case orchestrator.ExitStageUnavailable:
		return exitcode.Unavailable
	case orchestrator.ExitInvalidContract:
		return exitcode.Invalid
	case orchestrator.ExitFinalReportInvalid:
		return exitcode.Schema
	}
	return exitcode.Failed
}

// toolsCommand lists the tools the mesh can execute, one a line: name, description, and
// whether a call waits for approval.
func toolsCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tools", flag.ContinueOnError)
	addr := fs.String("addr", defaultAddr(), "orchestrator address")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("tools takes no arguments (got %q); it lists every tool the mesh can execute", fs.Args()))
	}
	client, closeConn, err := connect(*addr)
	if err != nil {
		return err
	}
	defer closeConn()
	resp, err := client.ListTools(ctx, &agentv1.ListToolsRequest{})
	if err != nil {
		return rpcError(*addr, err)
	}
	for _, t := range resp.GetTools() {
		approval := ""
		if t.GetRequiresApproval() {
			approval = " [requires approval]"
		}
		// One line a tool: a description's line breaks and indentation become single spaces,
		// and its terminal controls (an MCP server writes it) are shown as text.
		desc := printable(strings.Join(strings.Fields(t.GetDescription()), " "))
		fmt.Fprintf(stdout, "%-20s %s%s\n", t.GetName(), desc, approval)
	}
	return nil
}

// runIDCommand parses the flags shared by the commands that take one run id.
func runIDCommand(name string, args []string) (addr, runID string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	a := fs.String("addr", defaultAddr(), "orchestrator address")
	if err := parseFlags(fs, args); err != nil {
		return "", "", err
	}
	if fs.NArg() != 1 {
		return "", "", exitcode.Wrap(exitcode.Invalid, fmt.Errorf("%s takes one run id", name))
	}
	return *a, fs.Arg(0), nil
}

// getCommand prints a run's result as JSON and exits as the run ended (endedExit). A run that
// has not ended (GetRun's FAILED_PRECONDITION) has no result yet: it says how to follow the
// run, on stderr, and exits 0, as for a paused run.
func getCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	addr, runID, err := runIDCommand("get", args)
	if err != nil {
		return err
	}
	client, closeConn, err := connect(addr)
	if err != nil {
		return err
	}
	defer closeConn()
	res, err := client.GetRun(ctx, &agentv1.GetRunRequest{RunId: runID})
	if status.Code(err) == codes.FailedPrecondition {
		fmt.Fprintf(stderr, "run %s is still running; follow it with: agentmesh watch %s\n", runID, runID)
		return nil
	}
	if err != nil {
		return rpcError(addr, err)
	}
	if err := printJSON(res, stdout); err != nil {
		return err
	}
	return endedExit(res)
}

func cancelCommand(ctx context.Context, args []string, stdout io.Writer) error {
	addr, runID, err := runIDCommand("cancel", args)
	if err != nil {
		return err
	}
	client, closeConn, err := connect(addr)
	if err != nil {
		return err
	}
	defer closeConn()
	resp, err := client.CancelRun(ctx, &agentv1.CancelRunRequest{RunId: runID, Reason: "cancelled from the CLI"})
	if err != nil {
		return rpcError(addr, err)
	}
	fmt.Fprintf(stdout, "run %s: cancelled=%v outcome=%s\n", runID, resp.GetCancelled(), outcomeName(resp.GetOutcome()))
	return nil
}

func watchCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	addr := fs.String("addr", defaultAddr(), "orchestrator address")
	from := fs.Uint64("from", 0, "replay events after this seq")
	asJSON := fs.Bool("json", false, "print each event as one line of JSON on stdout instead of the progress")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return exitcode.Wrap(exitcode.Invalid, errors.New("watch takes one run id"))
	}
	client, closeConn, err := connect(*addr)
	if err != nil {
		return err
	}
	defer closeConn()
	stream, err := client.WatchRun(ctx, &agentv1.WatchRunRequest{RunId: fs.Arg(0), FromSeq: *from})
	if err != nil {
		return rpcError(*addr, err)
	}
	p := &progress{w: stderr}
	events := &runEvents{client: client, runID: fs.Arg(0), stream: stream, seq: *from, p: p}
	var result *typev1.RunResult // the run's end, when the events reach it
	for {
		ev, err := events.next(ctx)
		if errors.Is(err, io.EOF) && result == nil {
			return watchedPastEnd(ctx, client, *addr, fs.Arg(0), events.seq, *asJSON, p)
		}
		if errors.Is(err, io.EOF) {
			return endedExit(result)
		}
		if err != nil {
			if ctx.Err() != nil { // Ctrl-C ends the following, not the run
				p.line("stopped following run %s, which goes on; follow it again with: agentmesh watch %s --from %d", fs.Arg(0), fs.Arg(0), events.seq)
				return nil
			}
			p.endLine()
			if lost := lostStartError(fs.Arg(0), err); lost != nil {
				return lost
			}
			if !events.received { // the watch never began (an unknown run): nothing to follow on
				return rpcError(*addr, err)
			}
			return followOn(fs.Arg(0), events.seq, rpcError(*addr, err))
		}
		if f := ev.GetRunFinished(); f != nil {
			result = f.GetResult()
		}
		if !*asJSON {
			p.event(ev)
			continue
		}
		b, err := protojson.Marshal(ev)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(jsonPrintable(b)))
	}
}

// watchedPastEnd is how watch ends when the run's events ended before its run_finished: the
// watch began (--from) at or past it, and WatchRun ends at once, with nothing sent. The
// progress says that the run has ended, and how (GetRun), and the command exits as one that
// saw the run_finished does, with the run's exit code: it showed nothing and exited 0, also
// for a run that failed. With --json, whose stdout holds events only, it exits so too.
func watchedPastEnd(ctx context.Context, client agentv1.AgentServiceClient, addr, runID string,
	seq uint64, asJSON bool, p *progress) error {
	res, err := client.GetRun(ctx, &agentv1.GetRunRequest{RunId: runID})
	if err != nil {
		return rpcError(addr, err)
	}
	if asJSON {
		return endedExit(res)
	}
	p.line("run %s has ended: it has no events after %d", runID, seq)
	p.event(&eventv1.RunEvent{RunId: runID, Kind: &eventv1.RunEvent_RunFinished{
		RunFinished: &eventv1.RunFinished{Result: res, Outcome: res.GetOutcome()}}})
	return endedExit(res)
}

// transcriptCommand verifies a run's transcript, read from the mesh or from a saved result:
// the chain, and that the result's conversation, final report, ending and accounting are what
// the chain recorded (transcript.VerifyResult).
func transcriptCommand(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && isHelpFlag(args[0]) {
		args = []string{"verify", args[0]}
	}
	if len(args) == 0 || args[0] != "verify" {
		return exitcode.Wrap(exitcode.Invalid, errors.New("usage: agentmesh transcript verify [--addr ADDR | --file RESULT.json] [RUN_ID]"))
	}
	fs := flag.NewFlagSet("transcript verify", flag.ContinueOnError)
	addr := fs.String("addr", defaultAddr(), "orchestrator address")
	file := fs.String("file", "", "a RunResult saved as JSON (agentmesh get / run --json)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	result := &typev1.RunResult{}
	switch {
	case *file != "" && fs.NArg() == 0:
		b, err := os.ReadFile(*file)
		if err != nil {
			return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("--file: %w", err))
		}
		if err := protojson.Unmarshal(b, result); err != nil {
			return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("--file: %s is not a RunResult: %w", *file, err))
		}
	case *file == "" && fs.NArg() == 1:
		client, closeConn, err := connect(*addr)
		if err != nil {
			return err
		}
		defer closeConn()
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := client.GetRun(ctx, &agentv1.GetRunRequest{RunId: fs.Arg(0)})
		if status.Code(err) == codes.FailedPrecondition {
			// No result yet, so nothing to verify: not a broken transcript (exit 1).
			return exitcode.Wrap(exitcode.Invalid, fmt.Errorf(
				"run %s is still running: its transcript can be verified once it ends or pauses; "+
					"follow it with: agentmesh watch %s", fs.Arg(0), fs.Arg(0)))
		}
		if err != nil {
			return rpcError(*addr, err)
		}
		result = res
	default:
		return exitcode.Wrap(exitcode.Invalid, errors.New("transcript verify takes a run id or --file, not both"))
	}
	entries := result.GetTranscript()
	if len(entries) == 0 {
		return exitcode.Wrap(exitcode.Failed, fmt.Errorf("run %s has no transcript", result.GetRunId()))
	}
	if err := transcript.VerifyResult(result); err != nil {
		return exitcode.Wrap(exitcode.Failed, fmt.Errorf("transcript of run %s is broken: %w", result.GetRunId(), err))
	}
	fmt.Fprintf(stdout, "transcript of run %s: %d entries, chain intact and matching the result, head %s\n", result.GetRunId(), len(entries), entries[len(entries)-1].GetHash())
	return nil
}
