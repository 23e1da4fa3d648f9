package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// approveCommand resolves a paused tool call: approve (default), --reject or --modify JSON.
// --end-run (or --end-run=false) says whether a rejection ends the run, overriding the
// configured tools.reject_ends_run.
func approveCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("approve", flag.ContinueOnError)
	addr := fs.String("addr", defaultAddr(), "orchestrator address")
	reject := fs.Bool("reject", false, "reject the call (the model is told)")
	modify := fs.String("modify", "", "run the call with these JSON arguments instead")
	feedback := fs.String("feedback", "", "your reason, shown to the model")
	endRun := fs.Bool("end-run", false, "with --reject: the rejection ends the run (USER_REJECTED); --end-run=false lets the model go on (default: the configured tools.reject_ends_run)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return exitcode.Wrap(exitcode.Invalid, errors.New("approve takes a run id and a call id"))
	}
	req := &agentv1.ResolveApprovalRequest{RunId: fs.Arg(0), CallId: fs.Arg(1), Feedback: *feedback,
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}
	// --modify given empty (an unset shell variable) is no JSON object: it approved the call
	// as the model made it.
	endRunSet, modified := flagSet(fs, "end-run"), flagSet(fs, "modify")
	switch {
	case *reject && modified:
		return exitcode.Wrap(exitcode.Invalid, errors.New("approve takes --reject or --modify, not both"))
	case endRunSet && !*reject:
		return exitcode.Wrap(exitcode.Invalid, errors.New("--end-run goes with --reject"))
	case *reject:
		req.Decision = agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT
		if endRunSet {
			req.EndRun = endRun
		}
	case modified:
		req.Decision = agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY
		req.ModifiedArguments = &structpb.Struct{}
		if err := protojson.Unmarshal([]byte(*modify), req.ModifiedArguments); err != nil {
			return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("--modify is not a JSON object: %w", err))
		}
	}
	client, closeConn, err := connect(*addr)
	if err != nil {
		return err
	}
	defer closeConn()
	resp, err := client.ResolveApproval(ctx, req)
	if err != nil {
		return inputError(*addr, err)
	}
	// A rejection may end the run (USER_REJECTED), which --end-run tells and, without it, the
	// configured tools.reject_ends_run, which the CLI cannot see: never call an ending run
	// resumed.
	id := resp.GetRunId()
	switch {
	case resp.GetResumed() && *reject && req.GetEndRun():
		fmt.Fprintf(stdout, "run %s ends USER_REJECTED; see its end with: agentmesh watch %s\n", id, id)
	case resp.GetResumed() && *reject && !endRunSet:
		fmt.Fprintf(stdout, "run %s goes on without the call, or ends USER_REJECTED if tools.reject_ends_run is set; "+
			"follow it with: agentmesh watch %s\n", id, id)
	case resp.GetResumed():
		fmt.Fprintf(stdout, "run %s resumed; follow it with: agentmesh watch %s\n", id, id)
	default:
		fmt.Fprintf(stdout, "recorded; still waiting for: %v\n", resp.GetPendingCallIds())
	}
	return nil
}
