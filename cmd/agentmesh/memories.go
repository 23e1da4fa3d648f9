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

// memoriesCommand lists the user's memories (list, the default) or deletes one (delete ID),
// through the public API. Flags may come before or after the subcommand.
func memoriesCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("memories", flag.ContinueOnError)
	addr := fs.String("addr", defaultAddr(), "orchestrator address")
	user := fs.String("user", "", `user id (default: the authenticated principal's, or "cli" without credentials)`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sub, rest := "list", fs.Args()
	if len(rest) > 0 {
		sub = rest[0]
		if err := parseFlags(fs, rest[1:]); err != nil {
			return err
		}
		rest = fs.Args()
	}
	if *user == "" && !authenticated() {
		*user = "cli"
	}
	switch {
	case sub == "list" && len(rest) == 0:
	case sub == "delete" && len(rest) == 1:
	default:
		return exitcode.Wrap(exitcode.Invalid, errors.New("memories takes list, or delete and a memory id"))
	}
	client, closeConn, err := connect(*addr)
	if err != nil {
		return err
	}
	defer closeConn()
	if sub == "delete" {
		if _, err := client.DeleteMemory(ctx, &agentv1.DeleteMemoryRequest{UserId: *user, MemoryId: rest[0]}); err != nil {
			return rpcError(*addr, err)
		}
		fmt.Fprintf(stdout, "deleted memory %s\n", rest[0])
		return nil
	}
	return listMemories(ctx, client, *addr, *user, stdout)
}

// listMemories prints every memory of the user, newest first, one a line: id, importance,
// when it was stored, its text (line breaks and indentation as single spaces, terminal controls
// shown: printable), and where a learned fact came from.
func listMemories(ctx context.Context, client agentv1.AgentServiceClient, addr, user string, stdout io.Writer) error {
	req := &agentv1.ListMemoriesRequest{UserId: user}
	n := 0
	for {
		resp, err := client.ListMemories(ctx, req)
		if err != nil {
			return rpcError(addr, err)
		}
		for _, m := range resp.GetMemories() {
			n++
			fmt.Fprintf(stdout, "%s  %.2f  %s  %s", m.GetId(), m.GetImportance(), m.GetCreatedAt().AsTime().Local().Format("2006-01-02 15:04"),
				printable(strings.Join(strings.Fields(m.GetContent()), " ")))
			meta := m.GetMetadata().GetFields()
			if run := meta["run_id"].GetStringValue(); run != "" {
				fmt.Fprintf(stdout, "  (learned from run %s by the %s)", run, meta["learned_by"].GetStringValue())
			}
			fmt.Fprintln(stdout)
		}
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	if n == 0 {
		fmt.Fprintln(stdout, "no memories")
	}
	return nil
}
