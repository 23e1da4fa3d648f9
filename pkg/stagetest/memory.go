package stagetest

import (
	"context"
	"fmt"
	"slices"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// fact is what the memory cases store.
const fact = "My favourite colour is teal"

var memoryCases = []testCase{
	{"store", "a stored message answers stored, a memory id and a relevance score between 0 and 1",
		func(ctx context.Context, k *kit) error {
			_, err := store(ctx, k, k.id("user-store"))
			return err
		}},
	{"search-finds", "a search of the user's memories with words of a stored memory finds it",
		func(ctx context.Context, k *kit) error {
			user := k.id("user-search")
			id, err := store(ctx, k, user)
			if err != nil {
				return err
			}
			ids, err := search(ctx, k, user)
			if err != nil {
				return wantOK(err)
			}
			if !slices.Contains(ids, id) {
				return fmt.Errorf("search found %v, not the stored memory %s", ids, id)
			}
			return nil
		}},
	{"users-isolated", "another user's search and list never see a user's memory",
		func(ctx context.Context, k *kit) error {
			owner, other := k.id("user-owner"), k.id("user-other")
			id, err := store(ctx, k, owner)
			if err != nil {
				return err
			}
			ids, err := search(ctx, k, other)
			if err != nil {
				return wantOK(err)
			}
			list, err := memoryv1.NewMemoryServiceClient(k.conn).List(auth.OutgoingUser(ctx, other), &memoryv1.ListRequest{UserId: other})
			if err != nil {
				return wantOK(err)
			}
			if slices.Contains(ids, id) || slices.ContainsFunc(list.GetMemories(), func(m *memoryv1.Memory) bool { return m.GetId() == id }) {
				return fmt.Errorf("user %s sees memory %s of user %s", other, id, owner)
			}
			return nil
		}},
	{"delete-isolated", "another user's delete of a user's memory answers NOT_FOUND or deleted false, and the memory stays",
		func(ctx context.Context, k *kit) error {
			owner, other := k.id("user-keeper"), k.id("user-intruder")
			id, err := store(ctx, k, owner)
			if err != nil {
				return err
			}
			c := memoryv1.NewMemoryServiceClient(k.conn)
			resp, err := c.Delete(auth.OutgoingUser(ctx, other), &memoryv1.DeleteRequest{UserId: other, MemoryId: id})
			switch {
			case err != nil && status.Code(err) != codes.NotFound:
				return fmt.Errorf("user %s deleting memory %s of user %s: %w", other, id, owner,
					wantFailure(err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND))
			case err == nil && resp.GetDeleted():
				return fmt.Errorf("user %s deleted memory %s of user %s (deleted=true)", other, id, owner)
			}
			list, err := c.List(auth.OutgoingUser(ctx, owner), &memoryv1.ListRequest{UserId: owner})
			if err != nil {
				return wantOK(err)
			}
			if !slices.ContainsFunc(list.GetMemories(), func(m *memoryv1.Memory) bool { return m.GetId() == id }) {
				return fmt.Errorf("memory %s of user %s is gone after user %s asked to delete it", id, owner, other)
			}
			return nil
		}},
	{"list-and-delete", "a stored memory is listed; deleting it answers deleted, again deleted false or NOT_FOUND; it is no longer found",
		func(ctx context.Context, k *kit) error {
			user := k.id("user-delete")
			id, err := store(ctx, k, user)
			if err != nil {
				return err
			}
			c, actx := memoryv1.NewMemoryServiceClient(k.conn), auth.OutgoingUser(ctx, user)
			list, err := c.List(actx, &memoryv1.ListRequest{UserId: user})
			if err != nil {
				return wantOK(err)
			}
			if !slices.ContainsFunc(list.GetMemories(), func(m *memoryv1.Memory) bool { return m.GetId() == id }) {
				return fmt.Errorf("the list does not hold the stored memory %s", id)
			}
			resp, err := c.Delete(actx, &memoryv1.DeleteRequest{UserId: user, MemoryId: id})
			if err != nil {
				return wantOK(err)
			}
			if !resp.GetDeleted() {
				return fmt.Errorf("deleting the stored memory %s answered deleted=false", id)
			}
			again, err := c.Delete(actx, &memoryv1.DeleteRequest{UserId: user, MemoryId: id})
			switch {
			case err != nil && status.Code(err) != codes.NotFound:
				return fmt.Errorf("deleting it again: %w", wantFailure(err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND))
			case err == nil && again.GetDeleted():
				return fmt.Errorf("deleting it again answered deleted=true")
			}
			ids, err := search(ctx, k, user)
			if err != nil {
				return wantOK(err)
			}
			if slices.Contains(ids, id) {
				return fmt.Errorf("the deleted memory %s is still found", id)
			}
			return nil
		}},
	{"save-and-get-run", "a saved run result is read back by its run id with its owner and its transcript",
		func(ctx context.Context, k *kit) error {
			user, runID := k.id("user-run"), k.id("run")
			c, actx := memoryv1.NewMemoryServiceClient(k.conn), auth.OutgoingUser(ctx, user)
			saved := savedTranscript()
			_, err := c.SaveRun(actx, &memoryv1.SaveRunRequest{UserId: user, Result: &typev1.RunResult{
				RunId: runID, Outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, ExitReason: "COMPLETED", Success: true,
				FinalReport: &typev1.FinalReport{Content: "42"}, Transcript: saved}})
			if err != nil {
				return wantOK(err)
			}
			got, err := c.GetRun(actx, &memoryv1.GetRunRequest{RunId: runID})
			if err != nil {
				return wantOK(err)
			}
			if got.GetResult().GetRunId() != runID || got.GetUserId() != user || got.GetResult().GetFinalReport().GetContent() != "42" {
				return fmt.Errorf("GetRun answered run %q of user %q with report %q, want %q of %q with 42",
					got.GetResult().GetRunId(), got.GetUserId(), got.GetResult().GetFinalReport().GetContent(), runID, user)
			}
			entries := got.GetResult().GetTranscript()
			if len(entries) != len(saved) || transcript.Verify(entries) != nil || entries[len(entries)-1].GetHash() != saved[len(saved)-1].GetHash() {
				return fmt.Errorf("GetRun answered a transcript of %d entries, want the %d saved with the run, as they were (the public API's GetRun reads a finished run's transcript here)",
					len(entries), len(saved))
			}
			return nil
		}},
	{"save-run-again", "a second save of a run replaces the first: both answer OK, and the run " +
		"is read back as the second saved it (a replica that adopts a finished run saves it " +
		"again when it cannot tell the first save succeeded)",
		func(ctx context.Context, k *kit) error {
			user, runID := k.id("user-run"), k.id("run-again")
			c, actx := memoryv1.NewMemoryServiceClient(k.conn), auth.OutgoingUser(ctx, user)
			for i, report := range []string{"first", "second"} {
				_, err := c.SaveRun(actx, &memoryv1.SaveRunRequest{UserId: user, Result: &typev1.RunResult{
					RunId: runID, Outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY,
					ExitReason: "COMPLETED", Success: true, FinalReport: &typev1.FinalReport{Content: report},
					Transcript: savedTranscript()}})
				if err != nil && i == 0 {
					return wantOK(err)
				}
				if err != nil {
					st := status.Convert(err)
					return fmt.Errorf("the second save of the run answered %s (%q), want success: "+
						"SaveRun replaces an earlier save of the same run", st.Code(), st.Message())
				}
			}
			got, err := c.GetRun(actx, &memoryv1.GetRunRequest{RunId: runID})
			if err != nil {
				return wantOK(err)
			}
			if r := got.GetResult().GetFinalReport().GetContent(); r != "second" {
				return fmt.Errorf("GetRun answered the report %q, want %q: the second save replaces the first",
					r, "second")
			}
			return nil
		}},
	{"store-document-replaces", "a second StoreDocument of a document replaces its chunks: it " +
		"answers the first's memory ids as replaced, and the collection holds the second's " +
		"chunks only (agentmesh ingest replaces a changed file this way)",
		func(ctx context.Context, k *kit) error {
			user, collection := k.id("user-document"), k.id("docs")
			first, err := storeDocument(ctx, k, user, collection, "Teal is my favourite colour", "Otters hold hands")
			if err != nil {
				return err
			}
			second, err := storeDocument(ctx, k, user, collection, "Blue is my favourite colour now")
			if err != nil {
				return err
			}
			if got, want := sorted(second.GetReplacedIds()), sorted(first.GetMemoryIds()); !slices.Equal(got, want) {
				return fmt.Errorf("the second StoreDocument answered replaced_ids %v, want the first's memory_ids %v",
					got, want)
			}
			list, err := memoryv1.NewMemoryServiceClient(k.conn).List(auth.OutgoingUser(ctx, user),
				&memoryv1.ListRequest{UserId: user, Collection: collection})
			if err != nil {
				return wantOK(err)
			}
			var held []string
			for _, m := range list.GetMemories() {
				held = append(held, m.GetId())
			}
			if got, want := sorted(held), sorted(second.GetMemoryIds()); !slices.Equal(got, want) {
				return fmt.Errorf("the collection holds the memories %v after the second StoreDocument, want "+
					"only its chunks %v", got, want)
			}
			return nil
		}},
	{"unknown-run", "GetRun of an unknown run is NOT_FOUND",
		func(ctx context.Context, k *kit) error {
			_, err := memoryv1.NewMemoryServiceClient(k.conn).GetRun(auth.OutgoingUser(ctx, k.id("user-run")), &memoryv1.GetRunRequest{RunId: k.id("no-such-run")})
			return wantFailure(err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND)
		}},
	{"empty-user", "Store for no user (no user_id, no agentmesh-user) is INVALID_ARGUMENT naming user_id, or UNAUTHENTICATED where memory isolation is enforced",
		func(ctx context.Context, k *kit) error {
			_, err := memoryv1.NewMemoryServiceClient(k.conn).Store(ctx, &memoryv1.StoreRequest{
				Content: &typev1.Message{Role: typev1.Role_ROLE_USER, Content: fact}})
			if status.Code(err) == codes.Unauthenticated {
				return wantFailure(err, codes.Unauthenticated, typev1.StageErrorCode_STAGE_ERROR_CODE_UNAUTHENTICATED)
			}
			return wantInvalid(err, "user_id")
		}},
	{"empty-content", "Store without content is INVALID_ARGUMENT naming content",
		func(ctx context.Context, k *kit) error {
			user := k.id("user-empty")
			_, err := memoryv1.NewMemoryServiceClient(k.conn).Store(auth.OutgoingUser(ctx, user), &memoryv1.StoreRequest{UserId: user})
			return wantInvalid(err, "content")
		}},
	{"empty-query", "Search without a query is INVALID_ARGUMENT naming query",
		func(ctx context.Context, k *kit) error {
			user := k.id("user-query")
			_, err := memoryv1.NewMemoryServiceClient(k.conn).Search(auth.OutgoingUser(ctx, user), &memoryv1.SearchRequest{UserId: user})
			return wantInvalid(err, "query")
		}},
	{"transcript-without-run", "AppendTranscript without run_id is INVALID_ARGUMENT naming run_id",
		func(ctx context.Context, k *kit) error {
			_, err := memoryv1.NewMemoryServiceClient(k.conn).AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{
				Entries: []*typev1.TranscriptEntry{{Seq: 1, Hash: "h"}}})
			return wantInvalid(err, "run_id")
		}},
}

// store stores fact for user and returns the memory's id, or how the answer breaks the
// contract.
func store(ctx context.Context, k *kit, user string) (string, error) {
	resp, err := memoryv1.NewMemoryServiceClient(k.conn).Store(auth.OutgoingUser(ctx, user), &memoryv1.StoreRequest{
		UserId: user, ConversationId: k.id("conversation"), Content: &typev1.Message{Role: typev1.Role_ROLE_USER, Content: fact}})
	if err != nil {
		return "", wantOK(err)
	}
	if !resp.GetStored() || resp.GetMemoryId() == "" || resp.GetRelevanceScore() < 0 || resp.GetRelevanceScore() > 1 {
		return "", fmt.Errorf("the store answered stored=%v memory_id %q relevance %v, want true, an id, 0 to 1",
			resp.GetStored(), resp.GetMemoryId(), resp.GetRelevanceScore())
	}
	return resp.GetMemoryId(), nil
}

// storeDocument stores the chunks as the document "notes.md" of user's collection and returns
// the answer, or how it breaks the contract. A stage without StoreDocument breaks it too:
// agentmesh ingest then stores a file chunk by chunk, and two ingestions of a file that changes
// between them can leave both versions.
func storeDocument(ctx context.Context, k *kit, user, collection string, chunks ...string) (*memoryv1.StoreDocumentResponse, error) {
	req := &memoryv1.StoreDocumentRequest{UserId: user, Collection: collection,
		Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"source": structpb.NewStringValue("notes.md")}}}
	for _, c := range chunks {
		req.Chunks = append(req.Chunks, &memoryv1.DocumentChunk{Content: c})
	}
	resp, err := memoryv1.NewMemoryServiceClient(k.conn).StoreDocument(auth.OutgoingUser(ctx, user), req)
	if status.Code(err) == codes.Unimplemented {
		return nil, fmt.Errorf("StoreDocument %w: agentmesh ingest then stores a file chunk by chunk, and "+
			"two ingestions of a file that changes between them can leave both versions", wantOK(err))
	}
	if err != nil {
		return nil, wantOK(err)
	}
	if len(resp.GetMemoryIds()) != len(chunks) || slices.Contains(resp.GetMemoryIds(), "") {
		return nil, fmt.Errorf("StoreDocument of %d chunks answered the memory ids %q, want one for each",
			len(chunks), resp.GetMemoryIds())
	}
	return resp, nil
}

// sorted is a sorted copy of ids.
func sorted(ids []string) []string { return slices.Sorted(slices.Values(ids)) }

// savedTranscript is the transcript of the run the kit saves: two entries of a chain.
func savedTranscript() []*typev1.TranscriptEntry {
	chain := transcript.NewChain("stagetest", "")
	conversation := []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "What is 6 times 7?"}}
	first := chain.Append(typev1.RunState_RUN_STATE_PRECHECK, "PRECHECK", "", nil, nil, "contract feasible", conversation)
	conversation = append(conversation, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "42"})
	return []*typev1.TranscriptEntry{first, chain.Append(typev1.RunState_RUN_STATE_TERMINATE, "TERMINATE", "", nil, nil, "42", conversation)}
}

// search returns the ids of user's memories a search for fact's words finds.
func search(ctx context.Context, k *kit, user string) ([]string, error) {
	resp, err := memoryv1.NewMemoryServiceClient(k.conn).Search(auth.OutgoingUser(ctx, user), &memoryv1.SearchRequest{
		UserId: user, Query: "favourite colour", Limit: 10})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(resp.GetHits()))
	for i, h := range resp.GetHits() {
		ids[i] = h.GetMemory().GetId()
	}
	return ids, nil
}
