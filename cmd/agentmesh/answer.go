package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

// answerCommand answers the question a paused run asks: agentmesh answer RUN_ID TEXT (the
// words after the run id are the answer). --question names the question, so that a late
// answer never answers a later one.
func answerCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("answer", flag.ContinueOnError)
	addr := fs.String("addr", defaultAddr(), "orchestrator address")
	question := fs.String("question", "", "the question answered (pending_question.id); default: the one the run asks now")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		return exitcode.Wrap(exitcode.Invalid, errors.New("answer takes a run id and the answer"))
	}
	req := &agentv1.AnswerRequest{RunId: fs.Arg(0), Answer: strings.Join(fs.Args()[1:], " "), QuestionId: *question}
	client, closeConn, err := connect(*addr)
	if err != nil {
		return err
	}
	defer closeConn()
	resp, err := client.Answer(ctx, req)
	if err != nil {
		return inputError(*addr, err)
	}
	fmt.Fprintf(stdout, "run %s resumed with your answer to %s; follow it with: agentmesh watch %s\n", resp.GetRunId(), resp.GetQuestionId(), resp.GetRunId())
	return nil
}
