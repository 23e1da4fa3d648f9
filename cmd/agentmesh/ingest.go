package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ingestCommand stores a folder of Markdown and text files in a user's memory collection
// (memory.IngestDir over gRPC, acting for the user; over mutual TLS between services with
// TLS_CA, TLS_CERT and TLS_KEY) and prints what it did. A missing or unreadable directory or
// file is exit code 4, and so is a TLS handshake that fails on TLS_CA, TLS_CERT or TLS_KEY; an
// unreachable memory service is 3, MEMORY_FULL and other failures 1.
func ingestCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	addr := fs.String("addr", "", "memory service address (default $AGENTMESH_MEMORY_ADDR, else the configured services.memory)")
	user := fs.String("user", "cli", "user id whose collection receives the files (with auth on, the principal's tenant/user)")
	collection := fs.String("collection", action.KnowledgeCollection, "memory collection (knowledge_search reads "+action.KnowledgeCollection+")")
	configPath := configFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return exitcode.Wrap(exitcode.Invalid, errors.New("ingest takes one directory, e.g. agentmesh ingest ./docs"))
	}
	if strings.TrimSpace(*user) == "" {
		return exitcode.Wrap(exitcode.Invalid, errors.New("ingest: --user must not be empty"))
	}
	if strings.TrimSpace(*collection) == "" {
		// The empty collection is the user's personal memory, which every conversation recalls.
		return exitcode.Wrap(exitcode.Invalid, errors.New("ingest: --collection must name a knowledge collection (default "+action.KnowledgeCollection+
			"): the empty one is the user's personal memory, where documents would be recalled in every conversation"))
	}
	dir := fs.Arg(0)
	if info, err := os.Stat(dir); err != nil {
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("ingest: %w", err))
	} else if !info.IsDir() {
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("ingest: %s is not a directory", dir))
	}
	target, err := memoryAddr(*addr, *configPath)
	if err != nil {
		return err
	}
	// The documents go to the memory stage only: not to another service of the mesh.
	creds, err := stageCredentials("memory")
	if err != nil {
		return err
	}
	// A page of the collection is as large as the memory stage sends: the mesh's limit, not
	// gRPC's default 4 MiB.
	conn, err := newClient(target, append(creds.dialOptions(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(dial.DefaultMaxMessageBytes)))...)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()

	report, err := memory.IngestDir(ctx, memoryv1.NewMemoryServiceClient(conn), *user, *collection, dir)
	if err != nil {
		if report.Chunks > 0 || report.Replaced > 0 || report.Removed > 0 {
			fmt.Fprintf(stdout, "before failing: %s\n", reportSummary(report))
		}
		return ingestError(target, err)
	}
	fmt.Fprintf(stdout, "ingested %s into collection %q of user %q: %s\n", dir, *collection, *user, reportSummary(report))
	if len(report.Skipped) > 0 {
		fmt.Fprintf(stdout, "skipped (no text): %s\n", strings.Join(report.Skipped, ", "))
	}
	return nil
}

// memoryAddr is the memory service's address: the --addr flag, else $AGENTMESH_MEMORY_ADDR,
// else services.memory of the configuration (configFlag's configPath; 127.0.0.1:7007 by
// default).
func memoryAddr(flagAddr, configPath string) (string, error) {
	if flagAddr != "" {
		return flagAddr, nil
	}
	if a := os.Getenv("AGENTMESH_MEMORY_ADDR"); a != "" {
		return a, nil
	}
	cfg, err := config.Load(configPath)
	if err != nil {
		return "", exitcode.Wrap(exitcode.Invalid, err)
	}
	return cfg.Services.Memory, nil
}

// reportSummary counts what an ingestion stored, and what it removed of files gone from the
// folder when it removed any.
func reportSummary(r memory.IngestReport) string {
	s := fmt.Sprintf("%d file(s), %d chunk(s) stored, %d earlier chunk(s) replaced",
		r.Files, r.Chunks, r.Replaced)
	if r.Removed > 0 {
		s += fmt.Sprintf(", %d chunk(s) of files gone from the folder removed", r.Removed)
	}
	return s
}

// ingestError maps a failed ingestion to the CLI's exit codes.
func ingestError(addr string, err error) error {
	msg := describe(err)
	var refused *handshakeRefused
	switch se := stageerr.FromError(err); {
	case errors.As(err, &refused):
		// The mesh runs, and refused the CLI's credentials (stageCredentials), or they it.
		return exitcode.Wrap(exitcode.Invalid, fmt.Errorf("the TLS handshake with the memory "+
			"service at %s failed: %s (check TLS_CA, the mesh CA, and TLS_CERT and TLS_KEY, "+
			"the certificate of one of its services)", addr, refused.reason(msg)))
	case status.Code(err) == codes.Unavailable:
		return exitcode.Wrap(exitcode.Unavailable, fmt.Errorf("cannot reach the memory service at %s (is `agentmesh dev` running? set --addr or AGENTMESH_MEMORY_ADDR): %s", addr, msg))
	case se.Code == typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL:
		return exitcode.Wrap(exitcode.Failed, fmt.Errorf("the memory is full (MEMORY_FULL; raise memory.quota_per_user or delete memories): %s", msg))
	case status.Code(err) == codes.InvalidArgument, errors.As(err, new(*fs.PathError)):
		return exitcode.Wrap(exitcode.Invalid, errors.New(msg))
	}
	return exitcode.Wrap(exitcode.Failed, errors.New(msg))
}

// describe is err's message with the text of the gRPC status in its chain ("rpc error: code =
// … desc = …") replaced by the status's message.
func describe(err error) string {
	var rpcErr interface {
		error
		GRPCStatus() *status.Status
	}
	if !errors.As(err, &rpcErr) {
		return err.Error()
	}
	return strings.Replace(err.Error(), rpcErr.Error(), rpcErr.GRPCStatus().Message(), 1)
}
